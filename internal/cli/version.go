package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	tversion "github.com/truce-dev/truce/internal/version"
)

// version is truce's version, for reports that name their tool.
func version() string { return tversion.Get().Version }

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print truce's version and the Kubernetes, Argo CD, Flux and Helm versions it reproduces",
		Example: `  truce version
  truce version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := tversion.Get()
			switch output {
			case "text":
				return tversion.WriteText(cmd.OutOrStdout(), info)
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return fmt.Errorf("unknown --output %q (want text or json)", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
