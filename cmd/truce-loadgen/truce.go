package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/truce-dev/truce/webhook"
)

// truceHandler is the truce target: the handler `truce webhook serve`
// serves, for the policies in dir. It is alone in this file so that the
// rest of the command does not depend on the webhook package.
func truceHandler(ctx context.Context, dir string) (http.Handler, func(), error) {
	h, err := webhook.NewHandler(ctx, webhook.Options{PolicyPaths: []string{dir}})
	if err != nil {
		return nil, nil, fmt.Errorf("truce's webhook handler for %s: %w", dir, err)
	}
	return h, h.Close, nil
}
