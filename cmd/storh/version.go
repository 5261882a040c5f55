package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at release builds with
// -ldflags "-X main.version=v1.2.3"; otherwise it comes from the module
// version `go install …@v1.2.3` records, or "(devel)".
var version = ""

type versionInfo struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the storh version, Go version and platform",
		Long: `Version prints the storh version, the Go version it was built with and the
platform. A build from a Git clone adds the commit (and +dirty when there
were uncommitted changes); (devel) means Go recorded no version. With --json:
{"version":…,"go":…,"platform":…,"revision":…}.`,
		Example: `  storh version
  storh --json version`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if a.jsonOut {
				return a.printJSON(v)
			}
			s := fmt.Sprintf("storh %s %s %s", v.Version, v.Go, v.Platform)
			if v.Revision != "" {
				s += " " + v.Revision
				if v.Modified {
					s += "+dirty"
				}
			}
			_, err := fmt.Fprintln(a.stdout, s)
			return err
		},
	}
}
