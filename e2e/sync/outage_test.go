//go:build e2e

package sync

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/reconcile"
)

// proxy is a loopback TCP proxy to the API server that can be stopped and
// restarted on the same address: the server "goes away" for the clients
// that reach it through the proxy, and comes back.
type proxy struct {
	t      testing.TB
	target string // host:port of the server
	addr   string // host:port the proxy listens on, fixed by the first start

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	p := &proxy{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.start()
	t.Cleanup(p.stop)
	return p
}

// start listens on the proxy's address (a free port the first time) and
// relays every connection to the target.
func (p *proxy) start() {
	p.t.Helper()
	var ln net.Listener
	// The port was ours a moment ago; allow the kernel a moment to let go.
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err == nil, nil
	})
	if err != nil {
		p.t.Fatalf("proxy: cannot listen on %s again: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.relay(c)
			}()
		}
	}()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) relay(client net.Conn) {
	if !p.track(client) {
		client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(server) {
		client.Close()
		if server != nil {
			server.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// stop closes the listener and every live connection: the server is
// unreachable through the proxy until start.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestAPIServerGoesAway: after a pass with prune on, the API server becomes
// unreachable while an object leaves Git. The pass must report the failure
// (an error or Result.Errors), not panic and not prune: the object stays and
// the inventory keeps it. Once the server is back the next pass converges:
// synced, the unchanged objects untouched, the one that left Git pruned.
func TestAPIServerGoesAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "outage", false)
	cfg := e.srv.RESTConfig()
	u, err := url.Parse(cfg.Host)
	must(t, err)
	p := newProxy(t, u.Host)
	viaProxy := rest.CopyConfig(cfg)
	// Host is the proxy; TLS still verifies the server's certificate under
	// its own name (TLSClientConfig.ServerName and CAData are kept).
	viaProxy.Host = "https://" + p.addr
	if viaProxy.TLSClientConfig.ServerName == "" {
		viaProxy.TLSClientConfig.ServerName = u.Hostname()
	}
	lc, err := live.New(viaProxy)
	must(t, err)

	opts := e.options()
	opts.Prune = true
	docs := pruneNamespace + "---" + pruneSettings + "---" + pruneKeep
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(docs)}
	store := &reconcile.MemoryStore{}
	r, err := reconcile.New(lc, source{src}, store, opts)
	must(t, err)

	res := e.pass(r)
	if res.Count(reconcile.Created) != 3 || !res.Synced() {
		t.Fatalf("first pass: want 3 Created: %s", describe(res))
	}
	inventory := store.Last().State.Inventory
	if len(inventory) != 3 {
		t.Fatalf("inventory after the first pass: %v", inventory)
	}
	rvKeep := e.get(configMapGVK, e.ns, "keep").GetResourceVersion()

	// The server goes away, and Git drops settings meanwhile.
	p.stop()
	src.Objects, src.Revision = e.decode(pruneNamespace+"---"+pruneKeep), "main@sha1:2"
	start := time.Now()
	res, err = e.tryPass(r)
	t.Logf("pass without the server: %s, err %v: %s", time.Since(start).Round(time.Millisecond), err, describe(res))
	switch {
	case err != nil:
	case res == nil:
		t.Fatal("no result and no error")
	case len(res.Errors) == 0:
		t.Fatalf("the pass without the server reported no error: %s", describe(res))
	}
	if res != nil {
		if len(res.Pruned) != 0 || res.Writes != 0 {
			t.Fatalf("the pass without the server pruned or wrote: %s", describe(res))
		}
		if res.Synced() {
			t.Fatalf("the pass without the server claims to be synced: %s", describe(res))
		}
	}
	// Read through the harness's own client: the server is fine.
	if e.get(configMapGVK, e.ns, "settings") == nil {
		t.Fatal("settings was deleted while the server was unreachable")
	}
	if got := store.Last().State.Inventory; !sameRefs(got, inventory) {
		t.Fatalf("inventory after the failed pass %v, want it kept: %v", got, inventory)
	}

	// The server comes back on the same address.
	p.start()
	if got := "https://" + p.addr; got != viaProxy.Host {
		t.Fatalf("the proxy came back on %s, not %s", got, viaProxy.Host)
	}
	res = e.pass(r)
	if !res.Synced() || len(res.Pruned) != 1 || res.Pruned[0].Name != "settings" || res.Writes != 1 {
		t.Fatalf("the pass after the outage: want synced with settings pruned (1 write): %s", describe(res))
	}
	for _, name := range []string{e.ns, "keep"} {
		kind := "ConfigMap"
		if name == e.ns {
			kind = "Namespace"
		}
		if o := object(res, kind, name); o == nil || o.Action != reconcile.Unchanged {
			t.Fatalf("%s %s: want Unchanged: %s", kind, name, describe(res))
		}
	}
	if got := e.get(configMapGVK, e.ns, "keep").GetResourceVersion(); got != rvKeep {
		t.Fatalf("keep's resourceVersion moved %s -> %s", rvKeep, got)
	}
	if e.get(configMapGVK, e.ns, "settings") != nil {
		t.Fatal("settings is still there after the outage")
	}
	res = e.pass(r)
	if !res.Synced() || res.Writes != 0 || res.Count(reconcile.Unchanged) != 2 {
		t.Fatalf("the pass after: want 2 Unchanged and 0 writes: %s", describe(res))
	}
}

// sameRefs reports whether a and b hold the same objects (any version, any
// order: a failed pass keeps what left Git at the end of the inventory).
func sameRefs(a, b []cluster.Ref) bool {
	key := func(r cluster.Ref) string { return r.GroupKind().String() + "/" + r.Namespace + "/" + r.Name }
	count := map[string]int{}
	for _, r := range a {
		count[key(r)]++
	}
	for _, r := range b {
		count[key(r)]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}
