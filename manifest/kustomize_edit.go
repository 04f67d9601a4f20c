package manifest

import (
	"context"
	"fmt"
	"io/fs"
)

// KustomizationEdit returns the contents a kustomization file is to have
// for a build, given what the file holds. It must be deterministic: it may
// be called more than once per build.
type KustomizationEdit func(data []byte) ([]byte, error)

// BuildKustomization renders the kustomization in dir as LoadPaths does
// (confined to the repository, offline, without plugins, every object
// traced to its file and line), except that edit first changes the
// contents of dir's kustomization file as kustomize is to see them. This is
// how GitOps tools apply their own kustomize options: Argo CD runs
// `kustomize edit` on its checkout before `kustomize build`. Objects keep
// pointing at the lines of the file as written; edit's additions have no
// line of their own. A nil edit builds the kustomization as it is.
//
// It is an error for dir to hold no kustomization. Errors are *Errors, as
// with LoadPaths; a failing edit is one of class ErrKustomize naming the
// kustomization file.
func BuildKustomization(ctx context.Context, dir string, edit KustomizationEdit, opts Options) ([]Object, error) {
	l := loader{decoder: newDecoder(opts), seen: make(map[string]bool), edit: edit}
	if !l.proceed(ctx) {
		return l.result()
	}
	t, start, release, err := diskTree(dir, l.opts)
	if err != nil {
		l.fail(treeError(dir, err))
		return l.result()
	}
	defer release()
	kf, ok := findKustomization(t.fsys, start)
	if !ok {
		l.fail(newError(Source{File: dir}, fs.ErrNotExist,
			"directory holds no kustomization (kustomization.yaml, kustomization.yml or Kustomization)"))
		return l.result()
	}
	l.renderKustomization(t, start, kf)
	return l.result()
}

// editTop applies the edit to the kustomization file being built, whose
// resolved path is rel and displayed name name, and checks the result for
// remote references as kustomization files are checked.
func (k *kustFS) editTop(rel, name string, data []byte) ([]byte, error) {
	if k.edited != nil {
		return k.edited, nil
	}
	out, err := k.edit(data)
	if err != nil {
		return nil, k.refuse(newError(Source{File: name}, ErrKustomize, err.Error()))
	}
	if int64(len(out)) > k.l.opts.MaxFileBytes {
		return nil, k.refuse(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"the edited kustomization is larger than the %s limit ("+k.l.opts.LimitHint("MaxFileBytes")+")", formatBytes(k.l.opts.MaxFileBytes))))
	}
	if e := k.checkKustomization(rel, out); e != nil {
		// The reference came from the edit, not from a line of the file.
		e.Source.Line = 0
		return nil, k.refuse(e)
	}
	k.edited = out
	return out, nil
}
