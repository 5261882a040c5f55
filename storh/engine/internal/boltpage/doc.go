// Package boltpage reads bbolt's file format directly: the B+tree pages of
// a read transaction in bbolt's memory map (Reader, Cursor), the same
// pages through the file's descriptor to check their structure (Check,
// CheckSearchPaths), and the meta pages that say how large the file must
// be (Precheck, CheckFileHolds).
//
// # Why
//
// Speed: a point read through bbolt's API opens each bucket on the path
// with a cursor search and allocations, twice per read, which was most of
// what a read of a nested bucket cost over a raw Get from a top-level one.
// The engine finds a records bucket's root page once per commit and
// searches or walks the tree from it here (Reader.Get, Cursor): a read
// allocates nothing for the reader, and a walk one Cursor per chunk.
//
// Safety: bbolt trusts its pages. A damaged element header sends its
// cursors past the end of the mapping (a fault), a branch that points
// back at an ancestor makes them loop forever, and a file cut short under
// its meta pages faults bbolt's Open. So every read here is bounded and
// checked as it goes (a page outside the file, an element outside its
// page, a tree deeper than bbolt writes is ErrCorrupt, never a fault or a
// loop), and the checks read through the descriptor, where damage cannot
// fault, before anything walks a tree whose health is unknown.
//
// # Basics
//
//   - Reading: NewReader reads an open read transaction's mapping;
//     Reader.Get searches the tree at a root page for a key; NewCursor
//     walks it in key order as a kv.Cursor, and keeps the damage that
//     ended a walk in Err. What they return lies in the mapping and is
//     valid while the transaction is open: bbolt neither remaps the file
//     nor reuses its pages while a read transaction is.
//   - Checking the structure: Check reads every page a transaction can
//     reach and reports each finding with the top-level bucket it lies
//     under; CheckSearchPaths is the part of it cheap enough for every
//     open (branch pages, and the leaves of small trees), which names the
//     top-level buckets a search could loop in.
//   - Checking the file: Precheck, before bbolt opens a file, and
//     CheckFileHolds, on an open one, fail a file shorter than the pages
//     its meta page claims.
//   - Checking the reader: LayoutMismatch compares what the reader reads of
//     a file with what bbolt reads, so a file whose layout the reader does
//     not know is read through bbolt instead.
//
// # Caveats
//
// The layout is bbolt's format version 2, checked against bbolt
// LayoutChecked (v1.5.0); a test fails when go.mod names another release,
// until the assumptions listed with LayoutChecked are checked again. Pages
// are read in the machine's byte order, as bbolt writes them.
//
// The reader does not contain faults itself: a file truncated under the
// mapping faults the read, and the caller runs reads with faults turned
// into panics it recovers (debug.SetPanicOnFault). Nor does a Cursor
// check that keys ascend (see Cursor).
//
// Errors of damage wrap errs.ErrCorrupt. The package knows nothing of
// collections, handles or kinds: which tree to read, and what a damaged one
// means for a database, is the engine's.
package boltpage
