package store

// The store's API is split by noun so that no one type carries all of it
// (issue 39: a core of small handles). *Store keeps what every message
// passes through (encode, publish, acks, decode, reading back, health);
// these handles, each a value holding the store, carry the rest. They cost
// nothing to make: call s.Groups().Promote(…) where a method was.

// Groups is the store's handle on ordered groups: their heads, promoted,
// found, removed (groups.go).
type Groups struct{ s *Store }

// Bodies is the store's handle on large bodies kept in the Object Store
// (bodies.go, purge.go).
type Bodies struct{ s *Store }

// Consumers is the store's handle on a queue's consumers and on removing a
// queue's messages (consumers.go, purge.go).
type Consumers struct{ s *Store }

// Shards is the store's handle on the shard streams and the looks at which
// queues they hold (shards.go, scan.go).
type Shards struct{ s *Store }

// Groups is s's handle on ordered groups.
func (s *Store) Groups() Groups { return Groups{s} }

// Bodies is s's handle on large bodies.
func (s *Store) Bodies() Bodies { return Bodies{s} }

// Consumers is s's handle on queues' consumers.
func (s *Store) Consumers() Consumers { return Consumers{s} }

// Shards is s's handle on the shard streams.
func (s *Store) Shards() Shards { return Shards{s} }
