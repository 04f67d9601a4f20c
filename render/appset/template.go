package appset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/valyala/fasttemplate"
	"sigs.k8s.io/yaml"
)

// maxStringBytes bounds what one templated string may grow to: sprig's
// repeat and until can make a few bytes of template into gigabytes.
const maxStringBytes = 1 << 20

// maxListItems bounds the lists sprig's until and untilStep make.
const maxListItems = 100_000

// engine substitutes generator parameters into the strings of a
// template, as Argo CD's applicationset/utils.Render does: fasttemplate
// by default, text/template with sprig when goTemplate is set.
type engine struct {
	goTemplate bool
	options    []string
	// base holds the functions, parsed once and cloned per string as
	// Argo CD does (utils.baseTemplate).
	base *template.Template
	// ctx ends template execution: Go's templates cannot be interrupted,
	// so an execution is abandoned at ctx's end and stop set, which
	// makes its next function call or write fail.
	ctx  context.Context
	stop atomic.Bool
}

func newEngine(ctx context.Context, goTemplate bool, options []string) (*engine, error) {
	e := &engine{goTemplate: goTemplate, ctx: ctx}
	if !goTemplate {
		return e, nil
	}
	for _, o := range options {
		// template.Option panics on anything else.
		switch o {
		case "missingkey=default", "missingkey=invalid", "missingkey=zero", "missingkey=error":
		default:
			return nil, fmt.Errorf("goTemplateOptions: unknown option %q", o)
		}
	}
	e.options = options
	e.base = template.New("base").Funcs(e.stoppable(funcMap()))
	return e, nil
}

// errStopped fails the function calls and writes of an abandoned
// execution.
var errStopped = errors.New("template execution abandoned")

// stoppable wraps each function to fail once the engine is stopped:
// text/template turns the panic into an execution error.
func (e *engine) stoppable(m template.FuncMap) template.FuncMap {
	out := make(template.FuncMap, len(m))
	for name, f := range m {
		fv := reflect.ValueOf(f)
		out[name] = reflect.MakeFunc(fv.Type(), func(args []reflect.Value) []reflect.Value {
			if e.stop.Load() {
				panic(errStopped)
			}
			if fv.Type().IsVariadic() {
				return fv.CallSlice(args)
			}
			return fv.Call(args)
		}).Interface()
	}
	return out
}

// funcMap is sprig's, less what Argo CD removes and plus what it adds
// (applicationset/utils init).
func funcMap() template.FuncMap {
	m := sprig.TxtFuncMap()
	// Argo CD: "Avoid allowing the user to learn things about the environment."
	delete(m, "env")
	delete(m, "expandenv")
	delete(m, "getHostByName")
	m["normalize"] = SanitizeName
	m["slugify"] = slugify
	m["toYaml"] = toYAML
	m["fromYaml"] = fromYAML
	m["fromYamlArray"] = fromYAMLArray
	// Bounded versions of sprig's, same results below the bounds.
	m["repeat"] = func(count int, s string) (string, error) {
		if count < 0 {
			return "", errors.New("repeat: negative count")
		}
		if count > 0 && len(s) > maxStringBytes/count {
			return "", fmt.Errorf("repeat: more than %d bytes", maxStringBytes)
		}
		return strings.Repeat(s, count), nil
	}
	until, untilStep := m["until"].(func(int) []int), m["untilStep"].(func(int, int, int) []int)
	m["until"] = func(n int) ([]int, error) {
		if n > maxListItems || n < -maxListItems {
			return nil, fmt.Errorf("until: more than %d items", maxListItems)
		}
		return until(n), nil
	}
	m["untilStep"] = func(start, stop, step int) ([]int, error) {
		if step != 0 && (stop-start)/step > maxListItems {
			return nil, fmt.Errorf("untilStep: more than %d items", maxListItems)
		}
		return untilStep(start, stop, step), nil
	}
	return m
}

// SanitizeName makes a name a DNS subdomain name, as Argo CD's
// utils.SanitizeName does: lower case, [-a-z0-9.] only, at most 253
// characters, no leading or trailing '-' or '.'.
func SanitizeName(name string) string {
	name = invalidDNSNameChars.ReplaceAllString(strings.ToLower(name), "-")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.Trim(name, "-.")
}

var invalidDNSNameChars = regexp.MustCompile("[^-a-z0-9.]")

// toYAML, fromYAML and fromYAMLArray mirror Argo CD's template functions
// of the same names (utils/template_functions.go).
func toYAML(v any) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

func fromYAML(s string) (map[string]any, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	return m, nil
}

func fromYAMLArray(s string) ([]any, error) {
	a := []any{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		return nil, err
	}
	return a, nil
}

// isTemplated is Argo CD's test for a string fasttemplate should look at
// (utils.isTemplatedRegex): "." stops at newlines, so a tag must open and
// close on one line.
var isTemplated = regexp.MustCompile(".*{{.*}}.*")

// replace substitutes params into s (utils.Render.Replace).
func (e *engine) replace(s string, params map[string]any) (string, error) {
	if e.goTemplate {
		t, err := e.base.Clone()
		if err != nil {
			return "", err
		}
		for _, o := range e.options {
			t = t.Option(o)
		}
		if t, err = t.Parse(s); err != nil {
			return "", fmt.Errorf("failed to parse template %s: %w", s, err)
		}
		out := &limitedBuffer{max: maxStringBytes, stop: &e.stop}
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panic: %v", r)
				}
			}()
			done <- t.Execute(out, params)
		}()
		select {
		case err := <-done:
			if err != nil {
				return "", fmt.Errorf("failed to execute go template %s: %w", s, err)
			}
			return out.String(), nil
		case <-e.ctx.Done():
			e.stop.Store(true)
			return "", fmt.Errorf("the template %s did not finish in time; it may loop forever: %w", s, e.ctx.Err())
		}
	}
	if !isTemplated.MatchString(s) {
		return s, nil
	}
	t, err := fasttemplate.NewTemplate(s, "{{", "}}")
	if err != nil {
		return "", fmt.Errorf("invalid template: %w", err)
	}
	// Unknown tags and parameters that are no strings stay as written.
	return t.ExecuteFuncStringWithErr(func(w io.Writer, tag string) (int, error) {
		v, ok := params[strings.TrimSpace(tag)].(string)
		if strings.TrimSpace(tag) == "" || !ok {
			return fmt.Fprintf(w, "{{%s}}", tag)
		}
		return io.WriteString(w, v)
	})
}

// limitedBuffer fails writes beyond max bytes, and once stop is set.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	stop *atomic.Bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.stop.Load() {
		return 0, errStopped
	}
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("the template writes more than %d bytes", b.max)
	}
	return b.Buffer.Write(p)
}

// replaceDeep returns v with params substituted into every string and
// every map key, as Argo CD's deeplyReplace walks an Application. Map
// entries whose value is null are left out, as deeplyReplace leaves
// them.
func (e *engine) replaceDeep(v any, params map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		return e.replace(v, params)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x == nil {
				continue
			}
			got, err := e.replaceDeep(x, params)
			if err != nil {
				return nil, err
			}
			key, err := e.replace(k, params)
			if err != nil {
				return nil, err
			}
			out[key] = got
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			got, err := e.replaceDeep(x, params)
			if err != nil {
				return nil, err
			}
			out[i] = got
		}
		return out, nil
	}
	return v, nil
}
