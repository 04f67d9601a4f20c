package simulate

import "time"

// Epoch is the wall-clock time that simulated time 0, the first sync,
// stands for. Writers on a wall-clock schedule (a Kyverno DeletingPolicy's
// cron) compute their times from it. A fixed instant keeps runs
// reproducible; midnight UTC at the start of a Monday, so that the first
// run of a schedule is where one counts it from ("*/10 * * * *" acts at
// 10m, 20m…; "0 * * * *" at 1h).
var Epoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// scheduled writers act at times of their own (a cron schedule), whatever
// the cluster does: Next is the first of them after simulated time after;
// ok is false when there is none.
type scheduled interface {
	Next(after time.Duration) (at time.Duration, ok bool)
}
