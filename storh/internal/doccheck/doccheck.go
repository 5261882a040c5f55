// Package doccheck type-checks the Go code blocks of Markdown
// documentation, so that a block that stops compiling (a renamed method, a
// changed signature, a missing return value) fails a test instead of
// misleading a reader.
//
// Documentation shows fragments more often than programs: a block uses db
// or ctx without declaring them, and the blocks of one page build on each
// other (posts is opened in one block and queried in the next). So the
// blocks of one file are checked together, in order, each in a scope
// nested in the one of the block before it: a block sees what earlier
// blocks declared, and may declare the same names again (err := ... in
// every block) without a clash. Every ```go block is one of:
//
//   - a program: it starts with a package clause and is checked alone,
//     strictly (an unused variable or import is an error, as for a reader
//     who copies it);
//   - declarations: functions, or types only; they go to the file's
//     package scope, where every fragment sees them;
//   - a fragment: statements, possibly after import declarations, run in
//     the current function (by default func() error, so that `return err`
//     works). Fragments may leave variables and imports unused, and may
//     use the packages of [AutoImports] without importing them.
//
// What a fragment takes for granted is declared in an HTML comment right
// before its block, which Markdown renderers do not show:
//
//	<!-- doccheck
//	var db *storh.DB
//	var ctx context.Context
//	-->
//
// The lines after "doccheck" are Go statements put in the block's scope
// ahead of it. Two words after "doccheck" change what the block is:
//
//   - "<!-- doccheck func(w http.ResponseWriter, r *http.Request)" starts
//     a new function with that signature, for a block written as the body
//     of one; the blocks after it continue in that function;
//   - "<!-- doccheck mirror <import path> -->" says the block restates
//     declarations of that package (a struct type, a method's signature):
//     each must be identical to the package's own, field names, types and
//     tags included, so that the page cannot drift from the code.
//
// Errors name the Markdown file and line, through //line directives.
package doccheck

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// AutoImports are the packages a fragment may use without importing them.
// Their names are the last elements of their paths.
var AutoImports = []string{
	"bufio", "bytes", "context", "encoding/json", "errors", "fmt", "io",
	"iter", "log", "math", "net/http", "os", "strings", "sync",
	"sync/atomic", "time",
	"github.com/storhdb/storh-go/storh",
	"github.com/storhdb/storh-go/storh/jsonl",
	"github.com/storhdb/storh-go/storh/objectid",
	"github.com/storhdb/storh-go/storh/query",
	"github.com/storhdb/storh-go/storh/uuidv7",
	"github.com/storhdb/storh-go/storh/web",
}

// Block is one fenced code block of a Markdown file.
type Block struct {
	File string // the Markdown file, as given to Parse
	Line int    // line of the block's first code line, from 1
	Lang string // the fence's info string: "go", "sh", ...
	Code string
	// Directive is the doccheck comment right before the block, if any.
	Directive *Directive
}

// Directive is a <!-- doccheck ... --> comment.
type Directive struct {
	Line     int    // line of the comment's first line of statements
	Func     string // a new function's signature ("func(...) ..."), or ""
	Mirror   string // the import path the block restates, or ""
	Preamble string // statements declaring what the block uses
}

// Parse returns the fenced code blocks of a Markdown file. A fence is a
// line starting with ```, after any indentation (a block in a list item),
// which is then taken off the block's lines; an unclosed one is an error.
func Parse(file string, src []byte) ([]Block, error) {
	lines := strings.Split(string(src), "\n")
	var blocks []Block
	var pending *Directive // the directive that ended on the last non-blank line
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "<!-- doccheck"):
			d, end, err := parseDirective(file, lines, i)
			if err != nil {
				return nil, err
			}
			pending, i = d, end
			continue
		case strings.HasPrefix(strings.TrimLeft(line, " \t"), "```"):
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			b := Block{File: file, Line: i + 2, Lang: strings.TrimSpace(strings.TrimPrefix(line[len(indent):], "```")), Directive: pending}
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[end], " \t"), "```") {
				end++
			}
			if end == len(lines) {
				return nil, fmt.Errorf("%s:%d: the code block is not closed", file, i+1)
			}
			code := make([]string, 0, end-i-1)
			for _, l := range lines[i+1 : end] {
				code = append(code, strings.TrimPrefix(l, indent))
			}
			b.Code = strings.Join(code, "\n") + "\n"
			if pending != nil && b.Lang != "go" {
				return nil, fmt.Errorf("%s:%d: a doccheck comment before a %q block, not a go one", file, i+1, b.Lang)
			}
			blocks = append(blocks, b)
			pending, i = nil, end
			continue
		case strings.TrimSpace(line) == "":
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("%s:%d: a doccheck comment must come right before a go block", file, pending.Line-1)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a doccheck comment must come right before a go block", file, pending.Line-1)
	}
	return blocks, nil
}

// parseDirective reads the comment starting at lines[i]; end is the index
// of its last line.
func parseDirective(file string, lines []string, i int) (d *Directive, end int, err error) {
	end = i
	for end < len(lines) && !strings.Contains(lines[end], "-->") {
		end++
	}
	if end == len(lines) {
		return nil, 0, fmt.Errorf("%s:%d: the doccheck comment is not closed", file, i+1)
	}
	head := strings.TrimSpace(strings.TrimPrefix(lines[i], "<!-- doccheck"))
	var body []string
	if end == i {
		head = strings.TrimSpace(strings.TrimSuffix(head, "-->"))
	} else {
		body = slices.Clone(lines[i+1 : end])
		if last := strings.TrimSpace(strings.TrimSuffix(lines[end], "-->")); last != "" {
			body = append(body, last)
		}
	}
	d = &Directive{Line: i + 2, Preamble: strings.Join(body, "\n")}
	switch {
	case head == "":
	case strings.HasPrefix(head, "func("):
		d.Func = head
	case strings.HasPrefix(head, "mirror "):
		d.Mirror = strings.TrimSpace(strings.TrimPrefix(head, "mirror "))
		if len(body) > 0 {
			return nil, 0, fmt.Errorf("%s:%d: a mirror block takes no statements", file, i+1)
		}
	default:
		return nil, 0, fmt.Errorf("%s:%d: doccheck %q: expected nothing, func(...) or mirror <import path>", file, i+1, head)
	}
	return d, end, nil
}

// Checker type-checks blocks with the compiled export data of the
// packages they import, found by `go list -export` in a module.
type Checker struct {
	// goVersion is the module's language version (its go.mod's go line):
	// a block using a newer feature fails, as it would for a user.
	goVersion string
	fset      *token.FileSet
	exports   map[string]string // import path → export data file
	imp       types.Importer
}

// NewChecker prepares a checker for blocks that import paths (besides
// AutoImports and the standard library's packages they need). It runs
// `go list -export` once in moduleDir, with no network and without
// touching go.mod: every module must already be in the module cache.
func NewChecker(moduleDir string, paths []string) (*Checker, error) {
	c := &Checker{fset: token.NewFileSet(), exports: map[string]string{}}
	mod, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(mod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			c.goVersion = "go" + strings.TrimSpace(v)
		}
	}
	if c.goVersion == "" {
		return nil, fmt.Errorf("%s: no go line in go.mod", moduleDir)
	}
	args := []string{"list", "-e", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}\t{{with .Error}}{{.Err}}{{end}}"}
	args = append(args, AutoImports...)
	for _, p := range paths {
		if !slices.Contains(AutoImports, p) {
			args = append(args, p)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, rest, _ := strings.Cut(line, "\t")
		export, listErr, _ := strings.Cut(rest, "\t")
		if export != "" {
			c.exports[path] = export
		} else if listErr != "" {
			// Left out: importing it fails with go list's reason.
			c.exports[path] = "\x00" + listErr
		}
	}
	c.imp = importer.ForCompiler(c.fset, "gc", c.lookup)
	return c, nil
}

func (c *Checker) lookup(path string) (io.ReadCloser, error) {
	export, ok := c.exports[path]
	switch {
	case !ok:
		return nil, fmt.Errorf("package %s is not in the module or its dependencies", path)
	case strings.HasPrefix(export, "\x00"):
		return nil, errors.New(export[1:])
	}
	return os.Open(export)
}

// Imports returns the paths that blocks import explicitly or mirror, for
// NewChecker.
func Imports(blocks []Block) []string {
	var paths []string
	for _, b := range blocks {
		if b.Lang != "go" {
			continue
		}
		if d := b.Directive; d != nil && d.Mirror != "" && !slices.Contains(paths, d.Mirror) {
			paths = append(paths, d.Mirror)
		}
		f, err := parser.ParseFile(token.NewFileSet(), "", withPackage(b.Code), parser.ImportsOnly)
		if err != nil {
			continue // Check reports it
		}
		for _, s := range f.Imports {
			if p := strings.Trim(s.Path.Value, "`\""); !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// withPackage prefixes code with a package clause unless it has one, on
// the same line, so that line numbers stay those of the block.
func withPackage(code string) string {
	if isProgram(code) {
		return code
	}
	return "package doc; " + code
}

// isProgram reports whether code starts with a package clause (after
// comments).
func isProgram(code string) bool {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	_, tok, _ := s.Scan()
	return tok == token.PACKAGE
}

// Check type-checks the go blocks of one Markdown file (in file order) and
// returns every error, each naming the file and line.
func (c *Checker) Check(blocks []Block) []error {
	var errs []error
	var u unit
	for _, b := range blocks {
		if b.Lang != "go" {
			continue
		}
		switch {
		case b.Directive != nil && b.Directive.Mirror != "":
			errs = append(errs, c.checkMirror(b)...)
		case isProgram(b.Code):
			errs = append(errs, c.checkFile(lineDirective(b.File, b.Line)+b.Code, nil)...)
		default:
			if err := u.add(b); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if src, ok := u.source(); ok {
		errs = append(errs, c.checkFile(src, u.lenient)...)
	}
	return errs
}

// checkFile type-checks a package of one file. Unused variables and
// imports are not errors where lenient says so: a fragment shows a step,
// not a whole program.
func (c *Checker) checkFile(src string, lenient func(token.Position) bool) []error {
	f, err := parser.ParseFile(c.fset, generated, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		var list scanner.ErrorList
		if errors.As(err, &list) {
			errs := make([]error, len(list))
			for i, e := range list {
				errs[i] = e
			}
			return errs
		}
		return []error{err}
	}
	var errs []error
	conf := types.Config{
		GoVersion: c.goVersion,
		Importer:  c.imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) && te.Soft && lenient != nil && lenient(te.Fset.Position(te.Pos)) &&
				(strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used")) {
				return
			}
			errs = append(errs, err)
		},
	}
	_, _ = conf.Check("doc", c.fset, []*ast.File{f}, nil)
	return errs
}

// generated names the files the checker writes: a name without a
// directory, since a //line directive's relative file name is taken
// relative to the directory of the file it is in.
const generated = "doccheck.go"

// lineDirective makes the next line's position line of file.
func lineDirective(file string, line int) string {
	return fmt.Sprintf("//line %s:%d\n", filepath.ToSlash(file), line)
}

// unit assembles the declarations and fragments of one file into one Go
// source file.
type unit struct {
	imports []string // explicit import declarations, each with its //line
	decls   []string // top-level declarations, each with its //line
	funcs   []*chain
	// declLines are the Markdown lines of the declarations: a function
	// shown whole is checked strictly, as a program is.
	declLines []lineSpan
}

type lineSpan struct {
	file        string
	first, last int
}

// lenient reports whether an unused variable or import at p is allowed:
// everywhere but in declarations.
func (u *unit) lenient(p token.Position) bool {
	for _, s := range u.declLines {
		if p.Filename == s.file && s.first <= p.Line && p.Line <= s.last {
			return false
		}
	}
	return true
}

// chain is one function: fragments, each in a scope nested in the last.
type chain struct {
	sig    string
	body   strings.Builder
	nested int // open scopes to close
}

// add puts a block that is neither a program nor a mirror in the unit:
// its imports at file level, declarations at package scope, and
// statements in a scope of their own inside the current function, nested
// in the scope of the block before.
func (u *unit) add(b Block) error {
	const clause = "package doc; "
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, b.File, clause+b.Code, parser.ImportsOnly)
	if err != nil {
		return fmt.Errorf("%s:%d: %w", b.File, b.Line, err)
	}
	rest, restLine := b.Code, b.Line
	if n := len(f.Decls); n > 0 {
		// Imports are file-level in any block: take them out, and check
		// the rest from the line where it starts.
		for _, s := range f.Imports {
			path := strings.Trim(s.Path.Value, "`\"")
			if slices.Contains(AutoImports, path) && s.Name == nil {
				continue
			}
			spec := s.Path.Value
			if s.Name != nil {
				spec = s.Name.Name + " " + spec
			}
			u.imports = append(u.imports, lineDirective(b.File, b.Line+fset.Position(s.Pos()).Line-1)+"import "+spec+"\n")
		}
		offset := fset.Position(f.Decls[n-1].End()).Offset - len(clause)
		restLine += strings.Count(b.Code[:offset], "\n")
		rest = b.Code[offset:]
	}
	d := b.Directive
	if isDecls(rest) && (d == nil || (d.Preamble == "" && d.Func == "")) {
		u.decls = append(u.decls, lineDirective(b.File, restLine)+rest)
		u.declLines = append(u.declLines, lineSpan{b.File, restLine, restLine + strings.Count(rest, "\n")})
		return nil
	}
	if len(u.funcs) == 0 || (d != nil && d.Func != "") {
		sig := "func() error"
		if d != nil && d.Func != "" {
			sig = d.Func
		}
		u.funcs = append(u.funcs, &chain{sig: sig})
	}
	ch := u.funcs[len(u.funcs)-1]
	ch.body.WriteString("{\n")
	ch.nested++
	if d != nil && d.Preamble != "" {
		ch.body.WriteString(lineDirective(b.File, d.Line) + d.Preamble + "\n")
	}
	ch.body.WriteString(lineDirective(b.File, restLine) + rest)
	return nil
}

// isDecls reports whether code is package-level declarations that belong
// at file scope: it has a function declaration, or only type and import
// declarations (variables and constants may use a fragment's variables,
// so they stay in the function).
func isDecls(code string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", withPackage(code), parser.SkipObjectResolution)
	if err != nil || len(f.Decls) == 0 {
		return false
	}
	onlyTypes := true
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			return true
		case *ast.GenDecl:
			if d.Tok != token.TYPE && d.Tok != token.IMPORT {
				onlyTypes = false
			}
		}
	}
	return onlyTypes
}

// source returns the unit's Go file, or false if it holds nothing.
func (u *unit) source() (string, bool) {
	if len(u.decls) == 0 && len(u.funcs) == 0 && len(u.imports) == 0 {
		return "", false
	}
	var b strings.Builder
	b.WriteString("package doc\n\nimport (\n")
	for _, p := range AutoImports {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\n")
	for _, imp := range u.imports {
		b.WriteString(imp)
	}
	for _, d := range u.decls {
		b.WriteString(d + "\n")
	}
	for i, ch := range u.funcs {
		fmt.Fprintf(&b, "\nfunc doc%d%s {\n", i, strings.TrimPrefix(ch.sig, "func"))
		b.WriteString(ch.body.String())
		b.WriteString("\n" + strings.Repeat("}\n", ch.nested))
		b.WriteString("panic(0)\n}\n")
	}
	return b.String(), true
}

// checkMirror checks that each declaration of a mirror block is identical
// to the one of the same name in the package it names: types by their
// structure (fields, embedding, tags), functions and methods by their
// signatures, parameter names included.
func (c *Checker) checkMirror(b Block) []error {
	at := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", b.File, b.Line+line-1, fmt.Sprintf(format, args...))
	}
	pkg, err := c.imp.Import(b.Directive.Mirror)
	if err != nil {
		return []error{at(1, "mirror: %v", err)}
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, b.File, withPackage(b.Code), parser.SkipObjectResolution)
	if err != nil {
		return []error{at(1, "%v", err)}
	}
	// Each declaration's type is checked as a package-level type of a
	// file that sees the package's names unqualified, as its own source
	// does.
	type restated struct {
		line     int
		name     string
		recv     string // the method's receiver type name, or ""
		typeExpr ast.Expr
	}
	var decls []restated
	for _, d := range f.Decls {
		line := fset.Position(d.Pos()).Line
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					return []error{at(line, "mirror blocks restate types and functions only")}
				}
				decls = append(decls, restated{line: fset.Position(ts.Pos()).Line, name: ts.Name.Name, typeExpr: ts.Type})
			}
		case *ast.FuncDecl:
			r := restated{line: line, name: d.Name.Name, typeExpr: d.Type}
			if d.Recv != nil && len(d.Recv.List) == 1 {
				t := d.Recv.List[0].Type
				if star, ok := t.(*ast.StarExpr); ok {
					t = star.X
				}
				if id, ok := t.(*ast.Ident); ok {
					r.recv = id.Name
				}
			}
			decls = append(decls, r)
		}
	}
	var src strings.Builder
	fmt.Fprintf(&src, "package doc\n\nimport . %q\n\n", b.Directive.Mirror)
	for _, p := range AutoImports {
		fmt.Fprintf(&src, "import %q\n", p)
	}
	for i, d := range decls {
		var expr bytes.Buffer
		if err := printer.Fprint(&expr, fset, d.typeExpr); err != nil {
			return []error{at(d.line, "%v", err)}
		}
		fmt.Fprintf(&src, "%stype restated%d %s\n", lineDirective(b.File, b.Line+d.line-1), i, expr.String())
	}
	cf, err := parser.ParseFile(c.fset, generated, src.String(), parser.SkipObjectResolution)
	if err != nil {
		return []error{err}
	}
	var errs []error
	conf := types.Config{GoVersion: c.goVersion, Importer: c.imp, Error: func(err error) {
		var te types.Error
		if errors.As(err, &te) && te.Soft && strings.Contains(te.Msg, "imported and not used") {
			return
		}
		errs = append(errs, err)
	}}
	doc, _ := conf.Check("doc", c.fset, []*ast.File{cf}, nil)
	if len(errs) > 0 {
		return errs
	}
	qual := types.RelativeTo(pkg)
	for i, d := range decls {
		got := doc.Scope().Lookup(fmt.Sprintf("restated%d", i)).Type().Underlying()
		var want types.Type
		switch {
		case d.recv != "":
			recv := pkg.Scope().Lookup(d.recv)
			if recv == nil {
				errs = append(errs, at(d.line, "%s has no type %s", pkg.Path(), d.recv))
				continue
			}
			m, _, _ := types.LookupFieldOrMethod(types.NewPointer(recv.Type()), true, pkg, d.name)
			if fn, ok := m.(*types.Func); ok {
				want = fn.Type()
			}
		default:
			if obj := pkg.Scope().Lookup(d.name); obj != nil {
				want = obj.Type()
				if _, isType := obj.(*types.TypeName); isType {
					want = want.Underlying()
				}
			}
		}
		name := d.name
		if d.recv != "" {
			name = d.recv + "." + d.name
		}
		switch {
		case want == nil:
			errs = append(errs, at(d.line, "%s has no %s", pkg.Path(), name))
		case types.TypeString(got, qual) != types.TypeString(want, qual):
			errs = append(errs, at(d.line, "%s is not as in %s:\n\tthis page: %s\n\tthe code:  %s",
				name, pkg.Path(), types.TypeString(got, qual), types.TypeString(want, qual)))
		}
	}
	return errs
}
