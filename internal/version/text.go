package version

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints info for people: the build, then what it reproduces.
func WriteText(w io.Writer, info Info) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "truce\t%s\n", info.Version)
	if info.Commit != "" {
		fmt.Fprintf(tw, "commit\t%s\n", info.Commit)
	}
	fmt.Fprintf(tw, "go\t%s %s\n", info.GoVersion, info.Platform)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(info.Reproduces) == 0 {
		return nil
	}
	fmt.Fprintln(w, "reproduces:")
	for _, c := range info.Reproduces {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Version)
	}
	return tw.Flush()
}
