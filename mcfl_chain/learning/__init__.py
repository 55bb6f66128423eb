"""The machine-learning half of a trainer, with no chain in it.

- ``datasets``  MNIST, Fashion-MNIST (IDX files) and scikit-learn's digits, by name
- ``masks``     non-IID sampling masks (thesis §4.7), composable and serialisable
- ``scenario``  a trainer's data (dataset + masks + seed → train/validation/test), scenarios
- ``models``    LeNet-5, LeNet-light, LeNet autoencoder, with a seeded initialisation
- ``training``  local SGD training, evaluation, the selection metric
- ``codec``     state dict ⇄ safetensors bytes, validated on decode
- ``fingerprint`` a model's layout (tensor names, shapes, dtypes) hashed, and compared
- ``task``      the network's task descriptor ``<arch>:<datasets>[#fp=<fingerprint>]``
- ``tasks``     bring your own task: model factory + own data (+ own train/evaluate)
- ``local_data`` a trainer's own data from an .npz file or an image folder
"""
