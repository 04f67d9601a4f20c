package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// AuditPolicy is the audit policy the harness starts kube-apiserver with.
//
// Admission plugins report what they did as audit annotations (which
// ValidatingAdmissionPolicy failed, which webhook mutated, Pod Security's
// verdict, ...); annotations are recorded from the Metadata level up, so that
// is the level used. Only requests of the harness's own user are recorded
// (the server's internal loopback traffic is not), only the writes, and only
// at ResponseComplete: that is the stage carrying the admission annotations,
// and one line per request keeps lookups simple. Impersonated requests are
// recorded too: the audit policy matches on the authenticated user, which is
// AdminUser, not the impersonated one.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + AdminUser + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditLog incrementally reads the JSON-lines audit log and indexes the
// events by audit ID, so looking an event up costs only the new bytes since
// the last look-up.
type auditLog struct {
	path string

	mu      sync.Mutex
	offset  int64
	partial []byte
	events  map[string]*auditv1.Event
}

func newAuditLog(path string) *auditLog {
	return &auditLog{path: path, events: map[string]*auditv1.Event{}}
}

// refresh reads what was appended since the last call.
func (a *auditLog) refresh() error {
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	a.offset += int64(len(data))
	data = append(a.partial, data...)
	// A line still being written has no newline yet: keep it for next time.
	last := bytes.LastIndexByte(data, '\n')
	a.partial = append([]byte(nil), data[last+1:]...)
	for _, line := range bytes.Split(data[:last+1], []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev := &auditv1.Event{}
		if err := json.Unmarshal(line, ev); err != nil {
			return fmt.Errorf("audit log %s: %w", a.path, err)
		}
		if ev.Stage == auditv1.StageResponseComplete || ev.Stage == auditv1.StagePanic {
			a.events[string(ev.AuditID)] = ev
		}
	}
	return nil
}

// lookup returns the final-stage event for auditID, if it has been written.
func (a *auditLog) lookup(auditID string) (*auditv1.Event, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ev, ok := a.events[auditID]; ok {
		return ev, nil
	}
	if err := a.refresh(); err != nil {
		return nil, err
	}
	return a.events[auditID], nil
}

// AuditEvent returns the audit event (stage ResponseComplete) of the request
// with the given audit ID. The server runs with --audit-log-mode=blocking, so
// the event is written before the handler finishes; but the response can
// reach the client a moment before the handler returns, so the look-up polls
// briefly instead of reading once.
func (s *Server) AuditEvent(ctx context.Context, auditID string) (*auditv1.Event, error) {
	var ev *auditv1.Event
	err := poll(ctx, 10*time.Second, func(context.Context) (bool, error) {
		var err error
		ev, err = s.audit.lookup(auditID)
		return ev != nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit event %q: %w", auditID, err)
	}
	return ev, nil
}

// AuditAnnotations returns the audit annotations of the request with the
// given audit ID (see DryRunResult.AuditID): the admission annotations plus
// the authorizer's (authorization.k8s.io/decision and .../reason).
func (s *Server) AuditAnnotations(ctx context.Context, auditID string) (map[string]string, error) {
	ev, err := s.AuditEvent(ctx, auditID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ev.Annotations))
	for k, v := range ev.Annotations {
		out[k] = v
	}
	return out, nil
}
