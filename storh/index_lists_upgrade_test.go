package storh_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
)

// upgradeRecord is record i of a store written by a build from before
// paths went through lists: its items are a list of maps (the old index
// on items.sku holds null for it), a single map (the old index holds its
// sku), or missing.
func upgradeRecord(i int) storh.Map {
	r := storh.Map{"name": fmt.Sprintf("r%04d", i)}
	switch i % 3 {
	case 0:
		r["items"] = []any{storh.Map{"sku": fmt.Sprintf("s%d", i%7)}, storh.Map{"sku": fmt.Sprintf("s%d", (i+1)%7)}}
	case 1:
		r["items"] = storh.Map{"sku": fmt.Sprintf("s%d", i%7)}
	}
	return r
}

// upgradeIndexes are the indexes the old store declares: one through
// lists now, one on a single field.
var upgradeIndexes = []storh.CollectionOption{storh.WithIndex(storh.Index("items.sku")), storh.WithIndex(storh.Index("name"))}

// writeOldStore fills path as a build from before paths went through lists
// (tune.PreLists) would: n records of upgradeRecord, indexed the old way.
func writeOldStore(t *testing.T, path string, n int) {
	t.Helper()
	restore, err := tune.Set("prelists=1")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	t.Cleanup(restore) // also when a Fatal below ends the test
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("orders", upgradeIndexes...)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, n)
	for i := range items {
		items[i] = upgradeRecord(i)
	}
	if _, err := docs.PutMany(items); err != nil {
		t.Fatal(err)
	}
}

// skuNames is the reference answer to Field("items.sku").Eq(sku) over the
// records of writeOldStore: every record an element or the map of whose
// items has that sku, by name.
func skuNames(n int, sku string) []string {
	var out []string
	for i := range n {
		switch items := upgradeRecord(i)["items"].(type) {
		case []any:
			if slices.ContainsFunc(items, func(e any) bool { return e.(storh.Map)["sku"] == sku }) {
				out = append(out, fmt.Sprintf("r%04d", i))
			}
		case storh.Map:
			if items["sku"] == sku {
				out = append(out, fmt.Sprintf("r%04d", i))
			}
		}
	}
	return out
}

// checkUpgraded checks the store at path after the upgrade: the index on
// items.sku is complete, used, and gives the reference's answers, and
// Verify finds nothing.
func checkUpgraded(t *testing.T, db *storh.DB, n int) {
	t.Helper()
	docs, err := db.Docs("orders", upgradeIndexes...)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := docs.Indexes()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Building {
			t.Errorf("index %s still building after the upgrade (%d of %d)", info.Name, info.Built, n)
		}
	}
	for _, sku := range []string{"s0", "s3", "s6", "none"} {
		q := query.All().Where(query.Field("items.sku").Eq(sku))
		plan, err := docs.Explain(q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plan.Indexes, []string{"items.sku"}) {
			t.Errorf("%s: plan %v, want the index items.sku", q, plan)
		}
		recs, err := docs.Find(q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.Data()["name"].(string))
		}
		slices.Sort(got)
		if want := skuNames(n, sku); !slices.Equal(got, want) {
			t.Errorf("%s: %d records %v, want %d %v", q, len(got), got, len(want), want)
		}
	}
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("Verify after the upgrade: %q", problems)
	}
}

// A store written before paths went through lists, with an index on a
// dotted path: a read-only open uses it as it is (queries skip the old
// index and still answer right); the first open for writing rebuilds it,
// after which queries use it, Verify is clean, and a build from before
// refuses the store instead of misreading its entries.
func TestListsUpgrade(t *testing.T) {
	const n = 300
	path := newPath(t)
	writeOldStore(t, path, n)

	ro := openAt(t, path, storh.WithReadOnly())
	docs, err := ro.Docs("orders", upgradeIndexes...)
	if err != nil {
		t.Fatal(err)
	}
	q := query.All().Where(query.Field("items.sku").Eq("s3"))
	if plan, err := docs.Explain(q); err != nil || len(plan.Indexes) != 0 {
		t.Errorf("read-only, before the upgrade: plan %v, %v; want no index (the old one reads through maps only)", plan, err)
	}
	if recs, err := docs.Find(q); err != nil || len(recs) != len(skuNames(n, "s3")) {
		t.Errorf("read-only, before the upgrade: %d records, %v; want %d", len(recs), err, len(skuNames(n, "s3")))
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	db := openAt(t, path)
	checkUpgraded(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path) // a second open has nothing to do
	checkUpgraded(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	tuneFor(t, "prelists=1")
	for _, opts := range [][]storh.Option{nil, {storh.WithReadOnly()}} {
		old, err := storh.Open(path, opts...)
		if err == nil {
			old.Close()
			t.Fatalf("a build from before lists opened the upgraded store (options %v)", opts)
		}
		checkErr(t, err, storh.ErrCorrupt, "written by a newer storh")
	}
}

// An index the records no longer allow once paths go through lists is
// dropped by the upgrade, which Open survives; declaring it again fails
// as declaring it over such records does, naming the record.
func TestListsUpgradeDropsUnbuildable(t *testing.T) {
	path := newPath(t)
	unique := storh.WithIndex(storh.Index("items.sku").Unique())
	parallel := storh.WithIndex(storh.Index("items.sku", "tags.t"))
	restore, err := tune.Set("prelists=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore) // also when a Fatal below ends the test
	old := openAt(t, path)
	docs, err := old.Docs("orders", unique, parallel)
	if err != nil {
		t.Fatal(err)
	}
	// Read through maps only, both records hold null under both indexes;
	// through lists they share sku "x", and the second goes through lists
	// on both paths of the compound index.
	if _, err := docs.PutMany([]any{
		storh.Map{"items": []any{storh.Map{"sku": "x"}}},
		storh.Map{"items": []any{storh.Map{"sku": "x"}}, "tags": []any{storh.Map{"t": 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	restore()

	db := openAt(t, path)
	if docs, err = db.Docs("orders"); err != nil {
		t.Fatal(err)
	}
	if infos, err := docs.Indexes(); err != nil || len(infos) != 0 {
		t.Errorf("indexes after the upgrade: %v, %v; want none", infos, err)
	}
	if n := mustCount(t, docs); n != 2 {
		t.Errorf("%d records after the upgrade, want 2", n)
	}
	_, err = db.Docs("orders", unique)
	checkErr(t, err, storh.ErrUniqueViolation)
	_, err = db.Docs("orders", parallel)
	checkErr(t, err, storh.ErrInvalidIndex, "tags.t")
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
		t.Errorf("Verify: %q, %v", problems, err)
	}
}

const upgradeChildEnv = "STORH_LISTS_UPGRADE_CHILD"

// The child of TestPostgresListsUpgradeCrash: it opens the store for writing,
// which runs the upgrade, until it is killed.
func TestListsUpgradeChild(t *testing.T) {
	url := os.Getenv(upgradeChildEnv)
	if url == "" {
		t.Skip("the child of TestPostgresListsUpgradeCrash")
	}
	tuneFor(t, "build=5")
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	fmt.Println("upgraded")
}

// A process killed in the middle of the upgrade's rebuild, on PostgreSQL:
// the next open for writing finishes it, and the index is complete and
// right. (On a file the engine's TestUpgradeListsResumes stops the build
// between its transactions, which is where a kill leaves a file.)
func TestPostgresListsUpgradeCrash(t *testing.T) {
	if os.Getenv(upgradeChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	const n = 1500
	url := pgtest.URL(t)
	writeOldStore(t, url, n)

	cmd, in, out := startChild(t, "TestListsUpgradeChild", upgradeChildEnv+"="+url)
	defer in.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	// Watch the index from here until the child's build has committed
	// part of it, then kill the child.
	watcher, err := storh.Open(url, storh.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	wdocs, err := watcher.Docs("orders")
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok || strings.Contains(line, "upgraded") {
				t.Fatalf("the child finished the upgrade before the test saw it part way (%q)", line)
			}
			continue
		default:
		}
		infos, err := wdocs.Indexes()
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			if info.Name == "items.sku" && info.Building && info.Built > 0 && info.Built < n {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
				t.Logf("killed the child with %d of %d records indexed", info.Built, n)
			}
		}
	}
	cmd.Wait()

	db := openAt(t, url)
	checkUpgraded(t, db, n)
}

// Processes opening one PostgreSQL store for writing at once all run the
// upgrade: they join one rebuild (each build step moves the one mark), and
// every one opens without error, with every entry once.
func TestPostgresListsUpgradeConcurrent(t *testing.T) {
	const n, opens = 800, 4
	url := pgtest.URL(t)
	writeOldStore(t, url, n)
	tuneFor(t, "build=20")
	dbs := make([]*storh.DB, opens)
	errs := make([]error, opens)
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = storh.Open(url)
		}()
	}
	wg.Wait()
	for i, db := range dbs {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer db.Close()
	}
	for _, db := range dbs {
		checkUpgraded(t, db, n)
	}
	docs, err := dbs[0].Docs("orders")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := docs.Indexes()
	if err != nil {
		t.Fatal(err)
	}
	// Entries: per record one per distinct sku it reaches (a null one
	// when none), plus a mark for each record whose items are a list.
	want := 0
	for i := range n {
		switch upgradeRecord(i)["items"].(type) {
		case []any:
			want += 3
		default:
			want++
		}
	}
	for _, info := range infos {
		if info.Name == "items.sku" && info.Entries != want {
			t.Errorf("index items.sku has %d entries, want %d", info.Entries, want)
		}
	}
}
