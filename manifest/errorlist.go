package manifest

import "errors"

// EachError calls f with the *Error of every error err joins (or of err
// itself when it joins none), as Decode and Load return them. Renderers
// that decode text they produced use it to point the errors back at the
// files the text came from: f may change the *Error in place. Errors that
// are not an *Error are left alone.
func EachError(err error, f func(*Error)) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var me *Error
		if errors.As(e, &me) {
			f(me)
		}
	}
}
