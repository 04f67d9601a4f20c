package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
)

// report is the stable -o json document; see docs/admit.md.
type report struct {
	Results []*admission.Result `json:"results"`
}

func printResults(w io.Writer, format string, results []*admission.Result) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(report{Results: results})
	case "yaml":
		for i, r := range results {
			if r.Object == nil {
				continue
			}
			data, err := yaml.Marshal(r.Object)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		return nil
	default:
		return printText(w, results)
	}
}

func printText(w io.Writer, results []*admission.Result) error {
	for _, r := range results {
		id := r.Kind + " " + r.Name
		if r.Namespace != "" {
			id = r.Kind + " " + r.Namespace + "/" + r.Name
		}
		if r.Allowed {
			fmt.Fprintf(w, "%s  %s %s: admitted\n", r.Source, r.Operation, id)
		} else {
			// A webhook's denial carries the reason it sent, often none.
			status := fmt.Sprint(r.Code)
			if r.Reason != "" {
				status += " " + r.Reason
			}
			fmt.Fprintf(w, "%s  %s %s: DENIED (%s): %s\n", r.Source, r.Operation, id, status, r.Message)
		}
		for _, c := range r.Changes {
			round := ""
			if c.Round > 0 {
				round = fmt.Sprintf(" (reinvocation round %d)", c.Round)
			}
			fmt.Fprintf(w, "    %s  changed by %s%s\n", c.Path, c.By, round)
		}
		for _, warn := range r.Warnings {
			fmt.Fprintf(w, "    warning: %s\n", warn)
		}
		for _, k := range sortedKeys(r.AuditAnnotations) {
			fmt.Fprintf(w, "    audit: %s=%s\n", k, r.AuditAnnotations[k])
		}
		for _, u := range r.Unpredictable {
			if admission.FailurePolicyDecided(u) {
				fmt.Fprintf(w, "    unpredictable: %s could not be called offline; its failurePolicy decided\n", u)
			} else {
				fmt.Fprintf(w, "    unpredictable: %s\n", u)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	return nil
}
