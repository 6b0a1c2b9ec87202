"""The film world: films with a recurring credited cast, shots of three keyframes, body boxes.

`spec` (what a frame is, its ground-truth key), `film` (films and their stories), `render`
(keyframes under a film's grade and camera), `language` (edits between shots, captions),
`queries` (MovieNet-shaped queries), `benchmark` (the gallery and its ground truth), `stream`
(the trainers' stream: world and film queries). See docs/WORLD.md, "Films".
"""
from .film import Film, Shot, make_film, shoot
from .render import Keyframe, render_keyframe
from .spec import OTHER, Figure, Frame

__all__ = ["Film", "Shot", "make_film", "shoot", "Keyframe", "render_keyframe", "OTHER", "Figure", "Frame"]
