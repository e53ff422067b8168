"""Program features for the cost model: per-store rows of a scheduled, lowered function."""

from ._layout import FEATURE_NAMES as FEATURE_NAMES
from ._layout import FEATURE_VERSION as FEATURE_VERSION
from ._layout import NUM_FEATURES as NUM_FEATURES
from .per_store import PerStoreFeature as PerStoreFeature
from .per_store import per_store_features as per_store_features
