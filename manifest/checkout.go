package manifest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// CheckoutGit writes the tree of the commit src names into dir, for
// renderers that read files from disk (Helm, Jsonnet, Flux's kustomize
// build). The repository is opened or cloned as LoadGit does it. Only
// regular files and directories are written; symlinks are left out, so
// nothing in dir leads outside it. opts bounds the bytes written
// (MaxTotalBytes) and each file (MaxFileBytes).
func CheckoutGit(ctx context.Context, src GitSource, dir string, opts Options) (*GitRevision, error) {
	c, err := OpenGit(ctx, src)
	if err != nil {
		return nil, err
	}
	rev := c.Revision()
	return &rev, c.Checkout(ctx, dir, opts)
}

// Checkout writes the commit's whole tree into dir, as CheckoutGit does.
func (c *GitCommit) Checkout(ctx context.Context, dir string, opts Options) error {
	opts = opts.withDefaults()
	src, rev := c.src, c.rev
	tree, err := c.commit.Tree()
	if err != nil {
		return newError(Source{File: src.URL}, err, fmt.Sprintf("cannot read the tree of commit %s: %v", rev.Commit, err))
	}
	var total int64
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.Mode != filemode.Regular && f.Mode != filemode.Executable {
			return nil
		}
		if f.Size > opts.MaxFileBytes {
			return newError(Source{File: src.URL + "//" + f.Name}, ErrTooLarge, fmt.Sprintf("file is %s, larger than the %s limit ("+opts.LimitHint("MaxFileBytes")+")", formatBytes(f.Size), formatBytes(opts.MaxFileBytes)))
		}
		if total += f.Size; total > opts.MaxTotalBytes {
			return newError(Source{File: src.URL}, ErrTooLarge, fmt.Sprintf("the checkout is larger than the %s limit ("+opts.LimitHint("MaxTotalBytes")+")", formatBytes(opts.MaxTotalBytes)))
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if rel, err := filepath.Rel(dir, dst); err != nil || strings.HasPrefix(rel, "..") {
			return newError(Source{File: src.URL + "//" + f.Name}, ErrOutsideRoot, "path leaves the checkout")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, r); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		return fmt.Errorf("checking out %s at %s: %w", src.URL, rev.Commit, err)
	}
	return nil
}
