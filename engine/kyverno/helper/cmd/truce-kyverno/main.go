// Command truce-kyverno runs Kyverno's engine for truce: truce starts it
// and speaks a line-delimited JSON protocol (package protocol) on its standard
// input and output. Kyverno's logs go to standard error, silenced unless
// TRUCE_KYVERNO_LOG is set.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

func main() {
	quietLogs()
	if err := serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "truce-kyverno:", err)
		os.Exit(1)
	}
}

// serve answers requests until in ends. Requests are answered concurrently
// (a review can wait on nothing but Kyverno), responses written whole, one
// a line.
func serve(ctx context.Context, in io.Reader, out io.Writer) error {
	setupOnce.Do(setupGlobals)
	sets := newSets()
	defer sets.closeAll()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	write := func(r *protocol.Response) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(r)
	}
	var wg sync.WaitGroup
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		req, err := protocol.DecodeRequest(line)
		if err != nil {
			r := &protocol.Response{V: protocol.ProtocolVersion, Error: err.Error()}
			if req != nil {
				r.ID = req.ID
			}
			write(r)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			write(handle(ctx, sets, req))
		}()
	}
	wg.Wait()
	return sc.Err()
}

var setupOnce sync.Once

func handle(ctx context.Context, sets *sets, req *protocol.Request) (resp *protocol.Response) {
	resp = &protocol.Response{V: protocol.ProtocolVersion, ID: req.ID}
	defer func() {
		// Kyverno panicking on one request must not take down the
		// others: the request fails, naming the panic.
		if p := recover(); p != nil {
			resp = &protocol.Response{V: protocol.ProtocolVersion, ID: req.ID, Error: fmt.Sprintf("kyverno panicked: %v", p)}
			if os.Getenv("TRUCE_KYVERNO_LOG") != "" {
				fmt.Fprintf(os.Stderr, "%s\n", debug.Stack())
			}
		}
	}()
	switch req.Op {
	case protocol.OpHello:
		resp.Kyverno = kyvernoVersion()
	case protocol.OpLoad:
		id, hooks, warnings, err := sets.load(ctx, req.Load)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.Set, resp.Webhooks, resp.Warnings = id, hooks, warnings
	case protocol.OpReview:
		review, unpredictable, err := sets.review(ctx, req.Review)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.Review, resp.Unpredictable = review, unpredictable
	case protocol.OpUnload:
		sets.unload(req.Set)
	case protocol.OpGenerate:
		g, err := runGenerate(ctx, req.Generate)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.Generate = g
	case protocol.OpMutateExisting:
		g, err := runMutateExisting(ctx, req.Generate)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.Generate = g
	case protocol.OpAdmissionPolicies:
		a, err := runAdmissionPolicies(ctx, req.AdmissionPolicies)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.AdmissionPolicies = a
	case protocol.OpDeleting:
		g, err := runDeleting(ctx, req.Generate)
		if err != nil {
			resp.Error = err.Error()
			return resp
		}
		resp.Generate = g
	}
	return resp
}

// kyvernoVersion is the version of the Kyverno module built in.
func kyvernoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/kyverno/kyverno" {
				return d.Version
			}
		}
	}
	return "unknown"
}
