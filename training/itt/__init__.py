"""ITT (image–text–text) triplets for PACT-style training: see docs/ITT.md and training.build_itt.
The record itself (keys, checks, id) is the format's, `cir_core.formats.itt`."""
from cir_core.formats.itt import EDIT_TYPE_NAMES, EDIT_TYPES, make_id, validate_file, validate_record

from .build import Job, build, plan_jobs
from .generators import EndpointGenerator, FatalError, GenerationError, HFGenerator, TemplateGenerator
from .manifest import Source, read_manifest
from .prompts import AnswerError, load_prompts, parse_answer

__all__ = ["AnswerError", "EDIT_TYPES", "EDIT_TYPE_NAMES", "EndpointGenerator", "FatalError",
           "GenerationError", "HFGenerator", "Job", "Source", "TemplateGenerator", "build",
           "load_prompts", "make_id", "parse_answer", "plan_jobs", "read_manifest", "validate_file",
           "validate_record"]
