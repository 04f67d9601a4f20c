// Command release writes truce's release files and image; `make release`
// and `make image` run it from the repository's root. Nothing is pushed.
//
//	go run ./hack/release dist  -version v0.2.0 -commit SHA -out dist
//	go run ./hack/release image -version v0.2.0 -commit SHA -out dist/image -ref ghcr.io/truce-dev/truce:v0.2.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/truce-dev/truce/internal/release"
)

const (
	source  = "https://github.com/truce-dev/truce"
	license = "Apache-2.0"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: release dist|image [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var s release.Stamp
	fs.StringVar(&s.Version, "version", "", "version to stamp (a Git tag, v0.2.0)")
	fs.StringVar(&s.Commit, "commit", "", "Git revision to stamp")
	out := fs.String("out", "dist", "output directory")
	platforms := fs.String("platforms", "", "comma-separated OS/ARCH list (default: all of the command's)")
	ref := fs.String("ref", "", "image: name and tag written into the tarballs and the layout")
	caCerts := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "image: CA bundle to copy in (skipped when missing)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "dist":
		targets, err := parseTargets(*platforms, release.Targets())
		if err != nil {
			return err
		}
		d, err := release.Dist(ctx, release.DistOptions{ModuleDir: ".", Out: *out, Stamp: s, Targets: targets, Source: source, License: license})
		if err != nil {
			return err
		}
		fmt.Printf("wrote %d archives (truce and %s), SBOMs, %s and %s\n", len(d.Archives), release.HelperName, d.Checksums, d.Krew)
		return nil
	case "image":
		targets, err := parseTargets(*platforms, release.ImageTargets())
		if err != nil {
			return err
		}
		if *ref == "" {
			return errors.New("image: -ref is required")
		}
		files, err := release.BuildImage(ctx, release.ImageBuild{
			ModuleDir: ".", Out: *out, Ref: *ref, Targets: targets,
			ImageOptions: release.ImageOptions{Stamp: s, CACerts: *caCerts, Source: source, License: license},
		})
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s (crane push --index %s %s)\n", files.Layout, files.Layout, *ref)
		for _, t := range targets {
			fmt.Printf("wrote %s (docker load -i %s)\n", files.Tarballs[t], files.Tarballs[t])
		}
		return nil
	}
	return fmt.Errorf("unknown command %q (want dist or image)", args[0])
}

func parseTargets(list string, all []release.Target) ([]release.Target, error) {
	if list == "" {
		return all, nil
	}
	var ts []release.Target
	for p := range strings.SplitSeq(list, ",") {
		t, err := release.ParseTarget(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}
