// Package tune holds the sizes behind the engine's blocked indexes (how
// large a block of entries grows, and how many journaled changes an index
// holds before they are folded into its blocks) and behind the bounded
// transactions of DeleteMatching, PatchMatching and index builds. The
// defaults are what the engine ships with. Tests shrink them, so that
// folds, block splits, merges and transaction boundaries happen on a few
// dozen records instead of tens of thousands; the behaviour is the same at
// every size, only when things happen changes.
//
// Nothing outside tests changes these values. Set them before opening a
// database; they are read as the engine needs them, without locking.
package tune

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

var (
	// IndexBlockBytes bounds the bytes of one block of index entries (a
	// block with a single larger entry is allowed): about a bbolt page.
	IndexBlockBytes = DefaultIndexBlockBytes
	// IndexFoldMin and IndexFoldMax bound the journaled changes an index
	// holds before they are folded into its blocks: half its entries,
	// within these bounds.
	IndexFoldMin = DefaultIndexFoldMin
	IndexFoldMax = DefaultIndexFoldMax
	// IndexFoldStepBytes bounds the block bytes one fold transaction writes.
	IndexFoldStepBytes = DefaultIndexFoldStepBytes
	// MatchingBatch is about how many records one transaction of a large
	// DeleteMatching or PatchMatching writes: enough to amortise the
	// commit's fsyncs, few enough that writers wait briefly and a file
	// grows by little (bbolt frees a transaction's pages only once no
	// reader needs them).
	MatchingBatch = DefaultMatchingBatch
	// IndexLayout forces the layout of new indexes: "keys" (one key per
	// entry) or "blocks" (blocks and a journal); "" lets the backend choose.
	IndexLayout = ""
	// IndexBuildBatch is how many records one transaction of an index's
	// build indexes: small enough that writers wait little between steps,
	// large enough to amortise the commit.
	IndexBuildBatch = DefaultIndexBuildBatch
	// PreLists makes the engine behave as a build from before paths went
	// through lists, to write the stores that build left: new indexes
	// read dotted paths through maps only, opens for writing neither
	// raise the format to formatLists nor rebuild indexes, and a store
	// at formatLists is refused as a newer storh's.
	PreLists = false
)

const (
	DefaultIndexBlockBytes    = 4000
	DefaultIndexFoldMin       = 4096
	DefaultIndexFoldMax       = 1 << 17
	DefaultIndexFoldStepBytes = 4 << 20
	DefaultMatchingBatch      = 5000
	DefaultIndexBuildBatch    = 5000
)

// Env is the environment variable that Set's settings are passed to a
// child process in (crash tests run their writers in subprocesses).
const Env = "STORH_TEST_TUNE"

// Set applies comma-separated settings such as "block=256,foldmin=8" (keys:
// block, foldmin, foldmax, step, build, batch, layout, prelists) and
// returns a func that restores the previous values.
func Set(settings string) (restore func(), err error) {
	saved := [...]int{IndexBlockBytes, IndexFoldMin, IndexFoldMax, IndexFoldStepBytes, IndexBuildBatch, MatchingBatch}
	savedLayout, savedPreLists := IndexLayout, PreLists
	restore = func() {
		IndexBlockBytes, IndexFoldMin, IndexFoldMax, IndexFoldStepBytes, IndexBuildBatch, MatchingBatch = saved[0], saved[1], saved[2], saved[3], saved[4], saved[5]
		IndexLayout, PreLists = savedLayout, savedPreLists
	}
	for _, kv := range strings.Split(settings, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "layout" {
			if v != "" && v != "keys" && v != "blocks" {
				restore()
				return nil, fmt.Errorf("tune: layout %q: want keys or blocks", v)
			}
			IndexLayout = v
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			restore()
			return nil, fmt.Errorf("tune: %q: want a positive integer", kv)
		}
		switch k {
		case "block":
			IndexBlockBytes = n
		case "foldmin":
			IndexFoldMin = n
		case "foldmax":
			IndexFoldMax = n
		case "step":
			IndexFoldStepBytes = n
		case "build":
			IndexBuildBatch = n
		case "batch":
			MatchingBatch = n
		case "prelists":
			PreLists = n == 1
		default:
			restore()
			return nil, fmt.Errorf("tune: unknown setting %q", k)
		}
	}
	return restore, nil
}

// FromEnv applies the settings in the environment variable Env, if any.
func FromEnv() error {
	s := os.Getenv(Env)
	if s == "" {
		return nil
	}
	_, err := Set(s)
	return err
}
