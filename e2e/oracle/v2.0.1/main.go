// The oracle of this Trainer release: the shared command line (trainguard.local/oracle/common)
// with this release's plugin.go.
package main

import oracle "trainguard.local/oracle/common"

func main() {
	oracle.Main(oracle.Release{
		SpecType:    specType,
		NewStrategy: newStrategy,
		NewJudge:    func() oracle.Judge { return newPlugin().judge },
	})
}
