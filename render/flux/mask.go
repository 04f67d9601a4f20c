package flux

import (
	"errors"
	"strings"
)

// maskedPrefix is how much of a value messages may quote: manifest's
// decoder truncates quoted strings to 40 characters.
const maskedPrefix = 40

// mask replaces the Secret-derived values in err's message with "***",
// as kustomize-controller does before it reports an error. The chain is
// given up only when something was masked.
func mask(err error, secrets map[string]string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := maskString(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

func maskString(s string, secrets map[string]string) string {
	for _, v := range secrets {
		if v == "" {
			continue
		}
		s = strings.ReplaceAll(s, v, "***")
		if len(v) > maskedPrefix {
			s = strings.ReplaceAll(s, v[:maskedPrefix], "***")
		}
	}
	return s
}
