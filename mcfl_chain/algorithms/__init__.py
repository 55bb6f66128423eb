"""The paper's algorithms as pure functions: nothing here knows of the chain or of storage.

- ``model_selection``   Algorithm 1: metric × sqrt(popularity), top max(1, ⌈√n⌉)
- ``divergence``        weight divergence (Eq. 2), cosine distance, the authors'
                        element-wise divergence, state-dict flattening
- ``update_selection``  Algorithm 2: keep peers under median + tolerance·std
- ``fedavg``            sample-weighted FedAvg, bit-identical on every machine
- ``ifca``              IFCA's clusters on the DAG: each lineage's newest model
- ``robust``            defences: Krum / Multi-Krum selection; median, trimmed mean and
                        norm clipping as aggregation rules with on-chain codes
"""
