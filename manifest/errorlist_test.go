package manifest

import (
	"errors"
	"fmt"
	"testing"
)

func TestEachError(t *testing.T) {
	other := errors.New("other")
	a := &Error{Source: Source{File: "a", Line: 1}, Msg: "a"}
	b := &Error{Source: Source{File: "b", Line: 2}, Msg: "b"}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{name: "nil"},
		{name: "one", err: a, want: []string{"a"}},
		{name: "joined, with others", err: errors.Join(a, other, b), want: []string{"a", "b"}},
		{name: "wrapped", err: fmt.Errorf("building: %w", b), want: []string{"b"}},
		{name: "none", err: other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			EachError(tt.err, func(e *Error) { got = append(got, e.Msg) })
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("EachError visited %v, want %v", got, tt.want)
			}
		})
	}
	err := errors.Join(a, other)
	EachError(err, func(e *Error) { e.Source.Line = 7 })
	if want := "a:7: a\nother"; err.Error() != want {
		t.Errorf("after re-pointing: %q, want %q", err.Error(), want)
	}
}
