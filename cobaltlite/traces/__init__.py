"""Job logs in and out: SWF, Cobalt's accounting log, and the Intrepid reduced list."""
