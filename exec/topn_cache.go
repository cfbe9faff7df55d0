package exec

import (
	"encoding/binary"
	"slices"

	"rsql/planner"
	"rsql/state"
)

// The partition cache of a deduplication keeping the last row (DedupLast, Nexmark q18) and
// of a table's latest versions (TableVersions): both keep a partition per key for ever (or
// for the state TTL), so with every partition in memory their memory grows with the keys.
// With a store outside the process the operator keeps about cacheMax partitions in memory,
// its splits sharing them, under the rules of an aggregation's group cache (agg_cache.go):
// only a partition unchanged since a committed checkpoint leaves memory, the least recently
// used first; a Bloom filter of the partitions that left tells a new key from one to read
// back; changed partitions that fill the cache ask for a checkpoint.
//
// A state TTL still forgets partitions: those in memory at the sweeps of Watermark, as
// without a cache; one read back that a sweep since it left would have forgotten is taken
// as absent (and deleted from the store at the next checkpoint), so the output is the same
// with or without the cache; and, once per TTL of watermark progress, the store's
// partitions not in memory are swept for expired ones.

// dedupCacheSize is the partition cache of topNOp n over store given the setting (Env.
// AggCacheGroups: 0 is the default, negative is off); 0 means no cache.
func dedupCacheSize(n *planner.TopNNode, store state.Store, setting int) int {
	if n.Mode != planner.DedupLast && n.Mode != planner.TableVersions {
		return 0
	}
	return topNCacheSize(n, store, setting)
}

// splitCache is a split's share of the cache.
func (t *topNOp) splitCache() int { return max(t.cacheMax/max(len(t.splits), 1), 4) }

// expired reports whether partition p, out of memory, would have been forgotten by the
// state TTL by now: by the last sweep of the partitions in memory (Watermark), so that a
// partition is forgotten at the same moment whether it was in memory or not.
func (t *topNOp) expired(sp *topSplit, p *topPart) bool {
	ttl := t.node.TTL
	return ttl > 0 && sp.swept != MinWatermark && p.time < sp.swept-ttl &&
		(p.emitted || t.node.Mode == planner.DedupLast)
}

// fetch reads the partition of key back from the store when it may have left memory; nil
// when the store has none or it expired meanwhile.
func (t *topNOp) fetch(sp *topSplit, key []byte) (*topPart, error) {
	if !sp.gone.has(key) {
		return nil, nil
	}
	k := t.stateKey(sp, string(key))
	v, ok, err := t.store.Get(k)
	if err != nil {
		return nil, &StateError{Op: t.id, Split: sp.name, Err: err}
	}
	if !ok {
		return nil, nil
	}
	p, err := decodeTopPart(string(key), v)
	if err != nil {
		return nil, &StateError{Op: t.id, Split: sp.name, Err: err}
	}
	if t.expired(sp, p) {
		sp.dels = append(sp.dels, k)
		return nil, nil
	}
	sp.parts[p.key] = p
	return p, nil
}

// evict makes room in sp's share of the cache (evictParts).
func (t *topNOp) evict(sp *topSplit) {
	t.ages = evictParts(&sp.groupCache, sp.parts, t.splitCache(), t.ages, t.full, &t.pressure)
}

// partState is what the cache of a Top-N's, deduplication's or window aggregate's
// partitions knows of one (each partition type embeds it): dirty, changed since the
// split's last save; persisted, it has rows in the store (as of its last save, or read
// back; an emptied partition whose deletes are committed is not, and leaves without a
// trace in the filter); saved, the save that last wrote it (groupCache.saves; 0 when
// loaded or read back); touch, the split's row clock at its last row.
type partState struct {
	dirty, persisted bool
	saved            uint16
	touch            uint32
}

func (s *partState) cached() *partState { return s }

// cachedPart is a partition type with its cache state (an embedded partState).
type cachedPart interface{ cached() *partState }

// evictParts drops from parts, a split's partitions of a Top-N, deduplication or window
// aggregate kept in a cache of size, the least recently used ones that may leave memory
// (unchanged since a committed save: c's rules, agg_cache.go) until a quarter of size is
// free, or as many as may; those stored are recorded as spilled. When the partitions that
// may not leave fill the cache it calls full (a checkpoint lets them), and when they fill
// it pressFactor times over it holds the job's input (pr). ages is scratch space, returned
// for reuse.
func evictParts[P cachedPart](c *groupCache, parts map[string]P, size int, ages []uint32, full func(), pr *pressure) []uint32 {
	n := len(parts) - (size - size/4)
	ages = ages[:0]
	for _, p := range parts {
		if st := p.cached(); !st.dirty && st.saved != c.saves {
			ages = append(ages, c.tick-st.touch)
		}
	}
	if len(parts)-len(ages) >= size && full != nil {
		full()
	}
	pr.holdIf(len(parts)-len(ages) >= pressFactor*size)
	if len(ages) > 0 && n > 0 {
		var oldest uint32
		if n < len(ages) {
			slices.Sort(ages)
			oldest = ages[len(ages)-n]
		}
		for k, p := range parts {
			if st := p.cached(); !st.dirty && st.saved != c.saves && c.tick-st.touch >= oldest {
				if st.persisted {
					c.spill([]byte(k))
				}
				delete(parts, k)
			}
		}
	}
	c.evictAt = max(size, len(parts)+max(size/4, 1))
	return ages
}

// sweepStore deletes, at the next checkpoint, the stored partitions of sp that are not in
// memory and whose time expired.
func (t *topNOp) sweepStore(sp *topSplit) error {
	prefix := state.SplitPrefix(nil, t.job, t.id, sp.name)
	return t.store.Scan(prefix, func(key, v []byte) error {
		if len(key) < len(prefix)+16 {
			return &StateError{Op: t.id, Split: sp.name, Err: errBadTopN}
		}
		if _, in := sp.parts[string(key[len(prefix):len(key)-16])]; in {
			return nil
		}
		flags, n := binary.Uvarint(v)
		if n <= 0 {
			return &StateError{Op: t.id, Split: sp.name, Err: errBadTopN}
		}
		tm, m := binary.Varint(v[n:])
		if m <= 0 {
			return &StateError{Op: t.id, Split: sp.name, Err: errBadTopN}
		}
		if t.expired(sp, &topPart{time: tm, emitted: flags&1 != 0}) {
			sp.dels = append(sp.dels, append([]byte(nil), key...))
		}
		return nil
	})
}
