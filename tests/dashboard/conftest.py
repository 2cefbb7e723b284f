import pytest

from tests.factories import RuntimeImageFactory


@pytest.fixture
def image(db):
    return RuntimeImageFactory()
