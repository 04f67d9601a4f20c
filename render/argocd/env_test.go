package argocd

import "testing"

func TestEnvsubst(t *testing.T) {
	env := App{Name: "guestbook", Revision: "0123456789abcdef"}.Env()
	tests := []struct{ in, want string }{
		{"$ARGOCD_APP_NAME", "guestbook"},
		{"${ARGOCD_APP_NAME}-ui", "guestbook-ui"},
		{"img:$ARGOCD_APP_REVISION_SHORT", "img:0123456"},
		{"$ARGOCD_APP_REVISION_SHORT_8", "01234567"},
		{"price: $$5", "price: $5"},
		{"$UNKNOWN-x", "-x"}, // unknown variables vanish, as in Argo CD
		{"no variables", "no variables"},
	}
	for _, tt := range tests {
		if got := Envsubst(tt.in, env); got != tt.want {
			t.Errorf("Envsubst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
