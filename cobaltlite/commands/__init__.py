"""The user commands qsub, qstat and qdel: Cobalt's options and output, over the user socket."""
