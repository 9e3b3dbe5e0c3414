"""Library maintenance across layers: footage that moved or vanished (`footage`) and the
`strived check` consistency check with repair and salvage (`check`). It sits above the store,
perception and retrieval layers because it reads all three."""
