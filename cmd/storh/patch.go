package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// changeFlags are patch's change flags and the op of each.
var changeFlags = []struct{ flag, op, usage string }{
	{"set", "set", "set the field at `PATH=JSON`'s path to the JSON value, making the maps on the way"},
	{"unset", "unset", "remove the field at `PATH`"},
	{"inc", "inc", "add the number of `PATH=N` to the number at the path (a missing field becomes N)"},
	{"push", "push", "append the JSON value of `PATH=JSON` to the list at the path (a missing field becomes a list)"},
	{"pull", "pull", "remove every element equal to the JSON value of `PATH=JSON` from the list at the path"},
	{"add-to-set", "addToSet", "append the JSON value of `PATH=JSON` to the list at the path unless an element equals it"},
}

// changeArg is one change flag as given, kept until the command runs.
type changeArg struct{ flag, arg string }

// changeFlag is a change flag's pflag.Value. Every change flag appends to
// the one list, so the changes keep the command line's order across
// flags: --set n=0 --inc n=1 is not --inc n=1 --set n=0.
type changeFlag struct {
	flag string
	args *[]changeArg
}

func (f changeFlag) String() string { return "" }

func (f changeFlag) Type() string {
	if f.flag == "unset" {
		return "path"
	}
	return "path=json"
}

func (f changeFlag) Set(arg string) error {
	*f.args = append(*f.args, changeArg{f.flag, arg})
	return nil
}

// parseChange reads the argument of the change flag --flag: PATH for
// --unset, PATH=JSON for the others (--inc's JSON a number). The path ends
// at the first '=', so the JSON may hold '=' and a path may not. The JSON
// is read with the import type mapping ({"$date":…} is a time), here, so
// that a mistake names its flag before anything is opened; storh checks
// the path and the amount when the change applies.
func parseChange(flag, arg string) (web.PatchChange, error) {
	op := ""
	for _, cf := range changeFlags {
		if cf.flag == flag {
			op = cf.op
		}
	}
	if op == "" {
		return web.PatchChange{}, fmt.Errorf("--%s is not a change flag", flag)
	}
	if op == "unset" {
		if arg == "" {
			return web.PatchChange{}, usagef("--unset %q: give the PATH of the field to remove", arg)
		}
		return web.PatchChange{Op: op, Path: arg}, nil
	}
	path, value, ok := strings.Cut(arg, "=")
	switch {
	case !ok:
		return web.PatchChange{}, usagef("--%s %q: give PATH=JSON, such as --%s %s", flag, arg, flag, changeExample(flag, arg))
	case path == "":
		return web.PatchChange{}, usagef("--%s %q: the path before '=' is empty", flag, arg)
	}
	if _, err := jsonl.DecodeValue([]byte(value)); err != nil {
		return web.PatchChange{}, usagef("--%s %q: the value after '=' is not JSON: %s (a string is quoted: %s=%q)", flag, arg, libMsg(err), path, value)
	}
	raw := []byte(value)
	c := web.PatchChange{Op: op, Path: path}
	switch op {
	case "set", "pull":
		c.Value = raw
	case "inc":
		c.By = raw
	default:
		c.Values = []json.RawMessage{raw}
	}
	return c, nil
}

// changeExample is a right form of a change flag's argument, for a hint.
func changeExample(flag, arg string) string {
	if arg == "" {
		arg = "PATH"
	}
	if flag == "inc" {
		return shellQuote(arg + "=1")
	}
	return shellQuote(arg + `="value"`)
}

func (a *app) patchCmd() *cobra.Command {
	var f queryFlags
	var given []changeArg
	cmd := &cobra.Command{
		Use:   "patch COLL [ID]",
		Short: "Change fields of a record of a docs collection, or of those --where selects",
		Long: `Patch changes fields of the record ID of a docs collection in place, as the
library's Docs.Patch does, and prints the record as it then is (as 'storh
get' would). The change flags may be repeated and mixed; the changes apply
in the order given, all or none: on any error the record is as it was.

  --set PATH=JSON         set the field, making the maps on the way
  --unset PATH            remove the field (a missing one is fine)
  --inc PATH=N            add N to the number (a missing field becomes N)
  --push PATH=JSON        append the value to the list (a missing field becomes one)
  --pull PATH=JSON        remove every element equal to the value from the list
  --add-to-set PATH=JSON  append the value to the list unless an element equals it

PATH is a dotted path, each segment a key of a map ("author.name"), and
ends at the first '='; unlike in --where, it is not quoted, so a key that
holds a dot cannot be patched. JSON uses the import type mapping,
so '{"$date":"2024-05-01T12:00:00Z"}' is a time and a string is quoted:
--set 'status="done"'. docs/queries.md ("Patches") has what each change
does to each type, and which changes are refused: --inc of a string, a
push to a map, a path through a string. A result that a unique index holds
for another record is refused too.

Without ID, it patches the records that --where and the other selection
flags pick, exactly as 'storh query' with them would list them (indexes
make it a seek), in transactions of a few thousand records each, and
prints how many it changed (a record the patch leaves as it was is not
counted). A crash or an error between two transactions leaves the
earlier ones' records patched and the rest as they were: running it again
patches those again, which --set, --unset, --pull and --add-to-set do
harmlessly and --inc and --push do not: give it a --where that patched
records no longer match. That works on a
database only, not over --url: there, patch one ID at a time.

A record that is not there exits with 1 ("not found"); an id that is not a
UUIDv7, a change flag without PATH=JSON or with a value that is not JSON
is a usage error (2), and nothing is changed.`,
		Example: `  storh patch posts 0190a4f4-5c3b-7def-8123-456789abcdef --set 'title="Hello"' --inc views=1
  storh patch posts 0190a4f4-5c3b-7def-8123-456789abcdef --push 'tags="go"' --unset draft
  storh patch users 0190a4f4-5c3b-7def-8123-456789abcdef --set 'seen={"$date":"2024-05-01T12:00:00Z"}'
  storh patch posts --where 'status=draft' --set 'status="review"' --add-to-set 'labels="checked"'
  storh --json patch sessions --where 'expired=true' --unset token   # {"collection":"sessions","patched":12}`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(given) == 0 {
				return usagef("nothing to change: give --set, --unset, --inc, --push, --pull or --add-to-set")
			}
			changes := make([]web.PatchChange, len(given))
			for i, g := range given {
				var err error
				if changes[i], err = parseChange(g.flag, g.arg); err != nil {
					return err
				}
			}
			name := args[0]
			if len(args) == 1 {
				if !f.selective() {
					return usagef("nothing to patch: give an ID, or select records with --where (or --from, --until, --after, --before)")
				}
				return a.patchMatching(name, &f, changes)
			}
			if f.selective() || f.order != "" || f.limit != 0 || f.reverse {
				return usagef("give either an ID or selection flags (--where and the like), not both")
			}
			id, err := parseID("id", args[1])
			if err != nil {
				return err
			}
			s, found, err := a.openStoreExisting(true, name)
			if err != nil {
				return err
			}
			defer s.close()
			if err := patchable(name, found[0].Kind); err != nil {
				return err
			}
			line, err := s.patch(name, id, changes)
			if err != nil {
				return err
			}
			p := a.newPrinter()
			if err := p.printLine(line); err != nil {
				return err
			}
			return p.flush()
		},
	}
	for _, cf := range changeFlags {
		cmd.Flags().Var(changeFlag{cf.flag, &given}, cf.flag, cf.usage)
	}
	f.register(cmd.Flags(), false)
	return cmd
}

// patchable refuses a collection whose records cannot be patched.
func patchable(name, kind string) error {
	switch kind {
	case "log":
		return fmt.Errorf("collection %s is a log: its records are immutable and cannot be patched", qname(name))
	case "queue":
		return fmt.Errorf("collection %s is a queue: its jobs are changed by 'storh queue' commands only", qname(name))
	}
	return nil
}

// patchMatching patches what the query flags select in the docs
// collection name.
func (a *app) patchMatching(name string, f *queryFlags, changes []web.PatchChange) error {
	if a.url != "" {
		return usagef("patch with --where and the other selection flags works on a database only: over --url, give the ID to patch")
	}
	cs, err := storhChanges(changes)
	if err != nil {
		return err
	}
	return a.runMatching(name, f, matching{
		refuse: func(kind string) error { return patchable(name, kind) },
		did:    "patched", prep: "of",
		run: func(d *storh.Docs, q query.Query) (int, error) { return d.PatchMatchingContext(a.ctx, q, cs...) },
	})
}

// storhChanges gives the library's changes of the flags' changes.
func storhChanges(changes []web.PatchChange) ([]storh.Change, error) {
	out := make([]storh.Change, len(changes))
	for i, c := range changes {
		var err error
		if out[i], err = c.Change(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *localStore) patch(coll string, id uuidv7.UUID, changes []web.PatchChange) ([]byte, error) {
	cs, err := storhChanges(changes)
	if err != nil {
		return nil, err
	}
	d, err := s.db.Docs(coll)
	if err != nil {
		return nil, err
	}
	rec, err := d.Patch(id, cs...)
	if err != nil {
		return nil, err
	}
	return recordLine(rec)
}

func (s *httpStore) patch(coll string, id uuidv7.UUID, changes []web.PatchChange) ([]byte, error) {
	line, err := s.client.Patch(s.a.ctx, coll, id, changes)
	if err != nil {
		return nil, s.fail(s.a.ctx, err)
	}
	return append(line, '\n'), nil
}
