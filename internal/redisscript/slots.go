package redisscript

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// SlotOwners maps each of Redis Cluster's 16384 slots to the address of
// its primary, as CLUSTER SLOTS on c says now ("" for a slot no node
// serves); nil, without an error, on a server that is not a cluster.
func SlotOwners(ctx context.Context, c rueidis.Client) ([]string, error) {
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		if strings.Contains(err.Error(), "cluster support disabled") {
			return nil, nil
		}
		return nil, err
	}
	owners := make([]string, 1<<14)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("cluster slots: %v (%v)", r, err)
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || lo < 0 || hi >= 1<<14 || lo > hi {
			return nil, fmt.Errorf("cluster slots: range %v", f)
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		for slot := lo; slot <= hi; slot++ {
			owners[slot] = host + ":" + strconv.FormatInt(port, 10)
		}
	}
	return owners, nil
}
