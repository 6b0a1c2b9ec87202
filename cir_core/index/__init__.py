"""Index folders for large galleries: the resumable `build` of a folder from an image folder or
manifest (`python -m cir_core.index build`: worker decoding, shards, torchrun) and `prebuilt`
(opening such a folder). The FAISS `Index` itself is `cir_core.search.index`."""
