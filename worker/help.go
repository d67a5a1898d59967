package worker

// Help is what `t1 worker` says of itself.
const Help = `Runs a single stage's consumer. Any number of workers of one stage share its work through
its durable consumer, each running engine.concurrency handlers, with at most
engine.max_ack_pending events of the stage out at once across all of them. A stage that must
run once per run (control, eval) is leased: the worker first takes the stage's lease (a
JetStream KV entry renewed while it runs, expiring --lease-ttl after a crash), and a second one
exits 4 naming the holder. With --run R the worker runs that stage for run R alone, through a
consumer of R's events, beside other processes that run it for other runs (t1 run, t1 eval,
workers of other runs); without it, it runs the stage for every run and is refused while any
process runs it for one run, and the reverse. --exclusive leases any stage over every run;
--no-lease skips the lease.

--until-idle makes the worker exit 0 once nothing of the stage is pending or in flight for
--idle, for batch schedulers. --json prints a summary when the worker ends. Exit codes are
README's: 0 idle or stopped, 1 failed, 2 configuration, 3 NATS or S3 lost, 4 leased elsewhere,
5 interrupted before --until-idle found the stage idle.`
