package simulate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/cluster"
)

// cronDeleter deletes target at each multiple of every (a cron schedule
// such as Kyverno's DeletingPolicies keep), whatever the cluster does.
type cronDeleter struct {
	target cluster.Ref
	every  time.Duration
}

func (d *cronDeleter) Name() string             { return "cleanup" }
func (d *cronDeleter) Describe() string         { return "deletes " + d.target.String() }
func (d *cronDeleter) Watches(cluster.Ref) bool { return false }
func (d *cronDeleter) Delay() time.Duration     { return 0 }
func (d *cronDeleter) Next(after time.Duration) (time.Duration, bool) {
	return (after/d.every + 1) * d.every, true
}

func (d *cronDeleter) Act(ctx context.Context, c cluster.Cluster) error {
	if err := c.Delete(ctx, d.target, cluster.DeleteOptions{}); err != nil && !isAPIError(err) {
		return err
	}
	return nil
}

// A scheduled writer acts at its times; what it deletes, a tool that
// creates it again fights (a Loop over the whole object, paced by the
// schedule), and one that does not leaves OutOfSync.
func TestScheduledDeleter(t *testing.T) {
	target := refOf(t, "apps/v1", "Deployment", "shop", "web")
	cases := []struct {
		name   string
		tool   func(d []Desired) Tool
		want   Verdict
		reason string
	}{
		{
			name:   "Argo CD with self-heal creates it again",
			tool:   func(d []Desired) Tool { return &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d} },
			want:   Loop,
			reason: "cleanup deletes it and argocd creates it again, 6 times in 1h0m0s",
		},
		{
			name: "Flux creates it again at its interval",
			tool: func(d []Desired) Tool {
				return &Flux{Kustomization: "shop", Namespace: "flux-system", Interval: 5 * time.Minute, Desired: d}
			},
			want:   Loop,
			reason: "cleanup deletes it and flux creates it again",
		},
		{
			name:   "Argo CD without self-heal leaves it deleted",
			tool:   func(d []Desired) Tool { return &ArgoCD{App: "shop", Automated: true, Desired: d} },
			want:   OutOfSync,
			reason: "deleted after argocd created it, and argocd does not create it again",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, shop)
			d := desiredOf(t, web)
			w := &cronDeleter{target: target, every: 10 * time.Minute}
			res, err := Run(context.Background(), c, tc.tool(d), []Writer{w}, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Verdict != tc.want || !strings.HasPrefix(o.Reason, tc.reason) {
				t.Fatalf("%s (%s), want %s (%s…)", o.Verdict, o.Reason, tc.want, tc.reason)
			}
			var deletes []time.Duration
			for _, wr := range res.Writes {
				if wr.Writer == "cleanup" && wr.Verb == "delete" && wr.Error == "" {
					deletes = append(deletes, wr.At)
				}
			}
			if len(deletes) == 0 || deletes[0] != 10*time.Minute {
				t.Errorf("deletes at %v, want the first at 10m", deletes)
			}
			if tc.want != Loop {
				return
			}
			if o.Loop.Other != "cleanup" || o.Loop.Period != 10*time.Minute || len(o.Loop.Fields) != 1 || o.Loop.Fields[0] != "/" {
				t.Errorf("loop %+v, want the whole object with cleanup every 10m", o.Loop)
			}
		})
	}
}

// Epoch is a Monday at midnight UTC: daily and weekly schedules count
// from there.
func TestEpoch(t *testing.T) {
	if Epoch.Weekday() != time.Monday || Epoch.Hour() != 0 || Epoch.Minute() != 0 || Epoch.Location() != time.UTC {
		t.Errorf("epoch %s", Epoch)
	}
}
