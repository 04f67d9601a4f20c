package argocd

import "os"

// App identifies the Application a source is rendered for; Env turns it
// into the build environment Argo CD substitutes in Jsonnet variables and
// kustomize images and labels.
type App struct {
	Name, Namespace, Project string
	// Revision is the commit being rendered; TargetRevision what the
	// Application asks for (a branch, tag or commit).
	Revision, TargetRevision string
	RepoURL, Path            string
}

// Env returns the ARGOCD_APP_* variables of the repo-server's build
// environment (reposerver newEnv).
func (a App) Env() map[string]string {
	short := func(n int) string {
		if len(a.Revision) > n {
			return a.Revision[:n]
		}
		return a.Revision
	}
	return map[string]string{
		"ARGOCD_APP_NAME":                   a.Name,
		"ARGOCD_APP_NAMESPACE":              a.Namespace,
		"ARGOCD_APP_PROJECT_NAME":           a.Project,
		"ARGOCD_APP_REVISION":               a.Revision,
		"ARGOCD_APP_REVISION_SHORT":         short(7),
		"ARGOCD_APP_REVISION_SHORT_8":       short(8),
		"ARGOCD_APP_SOURCE_REPO_URL":        a.RepoURL,
		"ARGOCD_APP_SOURCE_PATH":            a.Path,
		"ARGOCD_APP_SOURCE_TARGET_REVISION": a.TargetRevision,
	}
}

// Envsubst substitutes $VAR and ${VAR} in s from env as Argo CD does
// (v1alpha1.Env.Envsubst): unknown variables become empty and $$ is a
// literal $.
func Envsubst(s string, env map[string]string) string {
	return os.Expand(s, func(name string) string {
		if name == "$" {
			return "$"
		}
		return env[name]
	})
}
