package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// benchRecords is the size the issue sets the throughput goals for:
// import ≥ 100k records/s, export ≥ 500k records/s.
const benchRecords = 200_000

// BenchmarkImportExport imports a 200k-record JSONL file into a fresh
// database and exports it again, through the command's own code paths
// (durable commits included), and reports records/s for each direction.
func BenchmarkImportExport(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(src, genRows(benchRecords, -1), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	exportDB := filepath.Join(dir, "export.db")
	if _, stderr, code := runStorh(ctx, "", "--db", exportDB, "-q", "import", "rows", src); code != 0 {
		b.Fatalf("import for export: %s", stderr)
	}

	b.Run("import", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			db := filepath.Join(dir, "import-"+strconv.Itoa(i)+".db")
			if _, stderr, code := runStorh(ctx, "", "--db", db, "-q", "import", "rows", src); code != 0 {
				b.Fatalf("import: %s", stderr)
			}
			b.StopTimer()
			os.Remove(db)
			b.StartTimer()
		}
		b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})

	b.Run("export", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := newApp(ctx, strings.NewReader(""), io.Discard, io.Discard, func(string) string { return "" })
			root := a.rootCmd()
			root.SetArgs([]string{"--db", exportDB, "-q", "export", "rows", "-"})
			if err := root.Execute(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
