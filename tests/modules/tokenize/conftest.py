import pytest

from tests.modules.tokenize.helpers import make_bpe_dir, make_cl100k_hf_dir


@pytest.fixture(scope="session")
def bpe_dir(tmp_path_factory):
    return make_bpe_dir(tmp_path_factory.mktemp("bpe"))


@pytest.fixture(scope="session")
def bpe_noeod_dir(tmp_path_factory):
    return make_bpe_dir(tmp_path_factory.mktemp("bpe-noeod"), special=False)


@pytest.fixture(scope="session")
def cl100k_hf_dir(tmp_path_factory):
    return make_cl100k_hf_dir(tmp_path_factory.mktemp("cl100k-hf"))
