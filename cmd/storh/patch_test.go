package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/web"
)

func TestParseChange(t *testing.T) {
	for _, tc := range []struct {
		flag, arg string
		want      web.PatchChange
		err       string // a substring of the error; "" for none
	}{
		{"set", `a.b=1`, web.PatchChange{Op: "set", Path: "a.b", Value: json.RawMessage(`1`)}, ""},
		{"set", `q="x=y"`, web.PatchChange{Op: "set", Path: "q", Value: json.RawMessage(`"x=y"`)}, ""},
		{"set", `m={"a":"=="}`, web.PatchChange{Op: "set", Path: "m", Value: json.RawMessage(`{"a":"=="}`)}, ""},
		{"set", `t={"$date":"2024-05-01T12:00:00Z"}`, web.PatchChange{Op: "set", Path: "t", Value: json.RawMessage(`{"$date":"2024-05-01T12:00:00Z"}`)}, ""},
		{"set", `n=null`, web.PatchChange{Op: "set", Path: "n", Value: json.RawMessage(`null`)}, ""},
		{"unset", `a.b`, web.PatchChange{Op: "unset", Path: "a.b"}, ""},
		{"unset", `a=b`, web.PatchChange{Op: "unset", Path: "a=b"}, ""},
		{"inc", `n=-2.5`, web.PatchChange{Op: "inc", Path: "n", By: json.RawMessage(`-2.5`)}, ""},
		{"push", `tags=["a","b"]`, web.PatchChange{Op: "push", Path: "tags", Values: []json.RawMessage{json.RawMessage(`["a","b"]`)}}, ""},
		{"pull", `tags="a"`, web.PatchChange{Op: "pull", Path: "tags", Value: json.RawMessage(`"a"`)}, ""},
		{"add-to-set", `tags="a"`, web.PatchChange{Op: "addToSet", Path: "tags", Values: []json.RawMessage{json.RawMessage(`"a"`)}}, ""},
		{"set", `=1`, web.PatchChange{}, `--set "=1": the path before '=' is empty`},
		{"unset", ``, web.PatchChange{}, `--unset "": give the PATH`},
		{"set", `a`, web.PatchChange{}, `--set "a": give PATH=JSON`},
		{"inc", `n`, web.PatchChange{}, `--inc "n": give PATH=JSON, such as --inc n=1`},
		{"set", `a=x`, web.PatchChange{}, `--set "a=x": the value after '=' is not JSON`},
		{"set", `a=done`, web.PatchChange{}, `a="done"`},
		{"push", `a=[1,`, web.PatchChange{}, `--push "a=[1,": the value after '=' is not JSON`},
		{"add-to-set", `a=`, web.PatchChange{}, `--add-to-set "a=": the value after '=' is not JSON`},
		{"pull", `a={"$date":"nope"}`, web.PatchChange{}, `--pull`},
		{"set", `a=1 2`, web.PatchChange{}, `not JSON`},
	} {
		got, err := parseChange(tc.flag, tc.arg)
		name := "--" + tc.flag + " " + tc.arg
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", name, err, tc.err)
			} else if _, usage := err.(usageError); !usage {
				t.Errorf("%s: %v is not a usage error", name, err)
			}
			continue
		}
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(tc.want)
		if err != nil || string(gotJSON) != string(wantJSON) {
			t.Errorf("%s: %s, %v; want %s", name, gotJSON, err, wantJSON)
		}
	}
}

// FuzzParseChange: whatever the argument, parseChange does not panic, and
// what it accepts is the argument split at its first '=' into a path and
// JSON that the web API and the library take as they are.
func FuzzParseChange(f *testing.F) {
	for _, s := range []string{`a.b=1`, `q="x=y"`, `=1`, `a`, `a=x`, `t={"$date":"2024-05-01T12:00:00Z"}`, `tags=["a",{"b":[1.5e3]}]`, `"a.b".c=null`, "a=\"\xff\""} {
		f.Add("set", s)
		f.Add("unset", s)
		f.Add("add-to-set", s)
	}
	f.Fuzz(func(t *testing.T, flag, arg string) {
		c, err := parseChange(flag, arg)
		if err != nil {
			return
		}
		if c.Op == "unset" {
			if c.Path != arg || arg == "" {
				t.Fatalf("--unset %q gave path %q", arg, c.Path)
			}
		} else {
			raw := append(append(c.Value, c.By...), func() []byte {
				if len(c.Values) == 1 {
					return c.Values[0]
				}
				return nil
			}()...)
			if c.Path == "" || strings.Contains(c.Path, "=") || c.Path+"="+string(raw) != arg {
				t.Fatalf("--%s %q gave %+v", flag, arg, c)
			}
			if !json.Valid(raw) {
				t.Fatalf("--%s %q: the value %q is not JSON", flag, arg, raw)
			}
		}
		if _, err := json.Marshal([]web.PatchChange{c}); err != nil {
			t.Fatalf("--%s %q: the change cannot be sent: %v", flag, arg, err)
		}
		if _, err := c.Change(); err != nil {
			t.Fatalf("--%s %q: %+v is not a change: %v", flag, arg, c, err)
		}
	})
}

// TestPatchCommand patches a file: by id, in the order the flags are
// given, by --where, and each refusal with its exit code and the database
// unchanged.
func TestPatchCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	seedRemote(t, path)
	id := remoteIDs[1].String()
	dump := func() string {
		out, errOut, code := runEnv([]string{"--db", path, "export", "posts"}, "", nil)
		if code != 0 {
			t.Fatalf("export: %d %s", code, errOut)
		}
		return out
	}
	run := func(args ...string) (string, string, int) {
		return runEnv(append([]string{"--db", path}, args...), "", nil)
	}

	out, errOut, code := run("patch", "posts", id, "--set", "score=10", "--inc", "score=1", "--unset", "at", "--set", `note="a=b"`,
		"--push", `tags="x"`, "--add-to-set", `tags="rust"`, "--pull", `tags="x"`, "--set", `m.d={"$date":"2024-05-01T00:00:00Z"}`)
	if code != 0 {
		t.Fatalf("patch: exit %d: %s", code, errOut)
	}
	got, _, _ := run("get", "posts", id)
	if out != got {
		t.Errorf("patch printed %s, get prints %s", out, got)
	}
	want := `"data":{"a.b":{"c":1},"m":{"d":{"$date":"2024-05-01T00:00:00Z"}},"note":"a=b","score":11,"slug":"pb","tags":["rust"]}}`
	if !strings.Contains(out, want) {
		t.Errorf("patch printed %s, want data %s", out, want)
	}
	if out, _, code := run("patch", "posts", id, "--inc", "score=1", "--set", "score=0"); code != 0 || !strings.Contains(out, `"score":0`) {
		t.Errorf("--inc then --set: exit %d, %s; want the flags applied in the order given", code, out)
	}

	out, errOut, code = run("--json", "patch", "posts", "--where", "draft=true", "--set", "draft=false", "--inc", "n=1")
	if code != 0 || out != `{"collection":"posts","patched":4}`+"\n" {
		t.Errorf("patch --where: exit %d, %q %s", code, out, errOut)
	}
	if out, _, _ := run("count", "posts", "--where", "draft=false and n=1"); out != "4\n" {
		t.Errorf("after patch --where, %s records are patched, want 4", strings.TrimSpace(out))
	}
	if _, errOut, code := run("patch", "posts", "--where", "draft=true", "--set", "x=1"); code != 0 || !strings.Contains(errOut, "patched 0 records") {
		t.Errorf("patch --where of nothing: exit %d, %s", code, errOut)
	}

	before := dump()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"patch", "posts", id}, 2, "nothing to change"},
		{[]string{"patch", "posts", "--set", "a=1"}, 2, "nothing to patch"},
		{[]string{"patch", "posts", id, "--where", "a=1", "--set", "a=1"}, 2, "not both"},
		{[]string{"patch", "posts", id, "--set", "a=nope"}, 2, `--set "a=nope": the value after '=' is not JSON`},
		{[]string{"patch", "posts", id, "--set", "a=1", "--unset", ""}, 2, "--unset"},
		{[]string{"patch", "posts", "bad", "--set", "a=1"}, 2, "id"},
		{[]string{"patch", "posts", id, "--set", "a=1", "--inc", "slug=1"}, 1, "invalid patch"},
		{[]string{"patch", "posts", id, "--set", `slug="pa"`}, 1, "unique"},
		{[]string{"patch", "posts", "--where", "score>=0", "--inc", "slug=1"}, 1, "invalid patch"},
		{[]string{"patch", "posts", remoteIDs[6].String() + "0", "--set", "a=1"}, 2, "id"},
		{[]string{"patch", "events", remoteIDs[8].String(), "--set", "a=1"}, 1, "is a log"},
		{[]string{"patch", "events", "--where", "n=1", "--set", "a=1"}, 1, "is a log"},
		{[]string{"patch", "jobs", id, "--set", "a=1"}, 1, "is a queue"},
		{[]string{"patch", "nope", id, "--set", "a=1"}, 1, "nope"},
	} {
		_, errOut, code := run(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("storh %s: exit %d, %s; want %d and %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.msg)
		}
	}
	if dump() != before {
		t.Error("a refused patch changed the database")
	}
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Docs("posts", storh.WithoutCreate()); err != nil {
		t.Fatal(err)
	}
}
