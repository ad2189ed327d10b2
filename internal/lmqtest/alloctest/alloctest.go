// Package alloctest measures what a piece of code allocates, for the tests
// and fuzz targets that hold decoders of outside bytes to memory in
// proportion to their input (issue 15: never to a declared length).
package alloctest

import "runtime"

// HeapAllocated returns the bytes f allocated on the heap. Other goroutines'
// allocations count too, so callers compare against generous bounds.
func HeapAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
