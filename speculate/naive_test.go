package speculate

import "slices"

// The naive models below recompute every draft by scanning the texts, with
// none of the package's indexes: the fuzz and table tests compare the
// drafters with them.

// naiveFollowers counts, over the texts, the tokens that follow an
// occurrence of p.
func naiveFollowers(texts [][]int32, p []int32) (counts map[int32]int, occurs bool) {
	counts = map[int32]int{}
	for _, x := range texts {
		for i := 0; i+len(p) <= len(x); i++ {
			if slices.Equal(x[i:i+len(p)], p) {
				occurs = true
				if i+len(p) < len(x) {
					counts[x[i+len(p)]]++
				}
			}
		}
	}
	return counts, occurs
}

// naiveSuffix is suffix decoding over texts: for each match length m (the
// tail's last m tokens occur in texts), the greedy walk of most frequent
// followers (lowest token on ties) within depth, min(k, factor × m) tokens
// and minProb; the walk of the highest score, the longest match on ties.
func naiveSuffix(texts [][]int32, tail []int32, depth, k int, factor, minProb float64) (draft []int32, score float64) {
	for m := 1; m <= len(tail) && m <= depth; m++ {
		cur := slices.Clone(tail[len(tail)-m:])
		if _, ok := naiveFollowers(texts, cur); !ok {
			break
		}
		limit := min(k, int(float64(m)*factor+1e-9))
		var got []int32
		prob, sc := 1.0, 0.0
		for len(got) < limit && len(cur) < depth {
			counts, _ := naiveFollowers(texts, cur)
			best, bc, total := int32(0), 0, 0
			for t, c := range counts {
				total += c
				if c > bc || c == bc && t < best {
					best, bc = t, c
				}
			}
			if total == 0 {
				break
			}
			if prob *= float64(bc) / float64(total); prob < minProb {
				break
			}
			got = append(got, best)
			sc += prob
			cur = append(cur, best)
		}
		if len(got) > 0 && sc >= score {
			draft, score = got, sc
		}
	}
	return draft, score
}

// naiveNgram is prompt lookup: the at most k tokens after the last earlier
// occurrence of seq's longest tail of minN to maxN tokens.
func naiveNgram(seq []int32, minN, maxN, k int) []int32 {
	for n := min(maxN, len(seq)); n >= minN; n-- {
		tail := seq[len(seq)-n:]
		for i := len(seq) - n - 1; i >= 0; i-- {
			if slices.Equal(seq[i:i+n], tail) {
				return seq[i+n : min(len(seq), i+n+k)]
			}
		}
	}
	return nil
}

// naiveSpace is a namespace's finished sequences under its token quota.
type naiveSpace struct{ seqs [][]int32 }

func (n *naiveSpace) finished(seq []int32, quota int) {
	seq = slices.Clone(seq[max(0, len(seq)-quota):])
	total := len(seq)
	for _, q := range n.seqs {
		total += len(q)
	}
	for total > quota {
		total -= len(n.seqs[0])
		n.seqs = n.seqs[1:]
	}
	n.seqs = append(n.seqs, seq)
}
