package cli

import "runtime/debug"

// version is the module version truce was built from ("devel" in a work
// tree), for reports that name their tool.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
