"""The queue manager: jobs, queues, holds, utility scores and the accounting log."""
