package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		// out are strings the table must show; errOut what stderr says.
		out    []string
		errOut string
	}{
		{
			name: "floor alone",
			args: []string{"-targets", "floor", "-concurrency", "2", "-requests", "40", "-warmup", "4"},
			code: exitOK,
			out:  []string{"| floor (no-op Go handler) | 40 | 0 |", "1.00× | 1.00× | 1.00× |", "HTTP/2.0 over TLS 1.3", "10 to /mutate, 10 to /validate"},
		},
		{
			// truce's answers are checked against the corpus: the three
			// expected denials, patches that apply, every uid.
			name: "truce and the floor",
			args: []string{"-concurrency", "2", "-requests", "40", "-warmup", "20"},
			code: exitOK,
			out:  []string{"| floor (no-op Go handler) | 40 | 0 |", "| truce (20 policies) | 40 | 0 |", "truce: 34 allowed, 6 denied,"},
		},
		{
			name: "HTTP/1.1",
			args: []string{"-targets", "floor", "-http1", "-concurrency", "2", "-requests", "20", "-warmup", "0"},
			code: exitOK,
			out:  []string{"HTTP/1.1 over TLS 1.3"},
		},
		{
			name:   "unknown target",
			args:   []string{"-targets", "floor,nginx"},
			code:   exitFailure,
			errOut: `unknown target "nginx"`,
		},
		{
			name:   "arguments",
			args:   []string{"extra"},
			code:   exitFailure,
			errOut: "unexpected arguments: extra",
		},
		{
			name:   "no requests",
			args:   []string{"-targets", "floor", "-requests", "0"},
			code:   exitFailure,
			errOut: "at least 1 request",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, want := range tc.out {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("the output does not show %q:\n%s", want, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tc.errOut) {
				t.Errorf("stderr does not say %q:\n%s", tc.errOut, stderr.String())
			}
		})
	}
}

func TestRunReportsWrongAnswers(t *testing.T) {
	// The floor allows everything; checked against the corpus, its three
	// expected denials in twenty requests are wrong answers.
	checked := targets()
	for i := range checked {
		checked[i].checkAllowed = true
	}
	var stdout, stderr bytes.Buffer
	o := options{concurrency: 2, requests: 20, check: true, targets: []string{"floor"}}
	err := measure(context.Background(), o, nil, checked, &stdout, &stderr)
	if !errors.As(err, new(answersError)) {
		t.Fatalf("error %v, want wrong answers\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "floor: 3 of 20 requests failed") ||
		!strings.Contains(stderr.String(), "allowed is true, want false") {
		t.Errorf("stderr does not list the wrong answers:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "| floor (no-op Go handler) | 20 | 3 |") {
		t.Errorf("the table does not count the errors:\n%s", stdout.String())
	}
}
