"""Word lists for the template (rule) mode: attribute values, objects, relations, views, places.
Everyday caption vocabulary (COCO/CC3M style); extend freely, the rules read only these tables."""

COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black",
           "white", "gray", "grey", "silver", "gold")
SIZE_SWAP = {"small": ("large", "big"), "large": ("small", "tiny"), "big": ("small", "little"),
             "tiny": ("huge", "large"), "huge": ("tiny", "small"), "little": ("big", "large"),
             "tall": ("short", "small"), "short": ("tall", "long"), "long": ("short",)}
MATERIALS = ("wooden", "metal", "plastic", "glass", "stone", "leather", "brick", "paper")
NUMBERS = ("two", "three", "four", "five", "six")
# Replacements stay inside a category, so the target caption stays plausible.
OBJECTS = {
    "animal": ("dog", "cat", "horse", "cow", "sheep", "bird", "elephant", "bear", "zebra", "giraffe"),
    "vehicle": ("car", "bus", "truck", "bicycle", "motorcycle", "train", "boat", "airplane"),
    "person": ("man", "woman", "boy", "girl", "child", "person"),
    "furniture": ("chair", "couch", "bench", "table", "bed"),
    "food": ("pizza", "sandwich", "cake", "apple", "banana", "donut"),
    "thing": ("umbrella", "bag", "ball", "kite", "frisbee", "laptop", "book", "cup", "bottle",
              "vase", "clock", "phone"),
}
CATEGORY = {w: c for c, ws in OBJECTS.items() for w in ws}
PLURAL = {"man": "men", "woman": "women", "child": "children", "person": "people", "sheep": "sheep",
          "bus": "buses", "couch": "couches", "sandwich": "sandwiches", "bench": "benches"}
# Addable things that fit most photos.
ADDABLE = ("dog", "cat", "bird", "bicycle", "umbrella", "ball", "bench", "kite", "bag", "car")
# Relation swaps (spatial): phrase -> opposites.
RELATIONS = {"in front of": ("behind",), "behind": ("in front of",), "above": ("below", "under"),
             "below": ("above",), "under": ("on top of", "above"), "on top of": ("under", "beside"),
             "inside": ("outside",), "outside": ("inside",), "next to": ("behind", "in front of"),
             "beside": ("behind", "in front of")}
SIDES = {"left": "right", "right": "left"}
# Viewpoints: phrase in the caption -> edit clauses that ask for it.
VIEWS = {
    "seen from above": ("show it from above", "view the scene from overhead"),
    "seen from below": ("show it from a low angle, looking up", "view it from below"),
    "in a close-up": ("zoom in to a close-up", "make it a close-up shot"),
    "seen from far away": ("zoom out to show it from far away", "show it from a distance"),
    "seen from the side": ("show it from the side", "view it in profile from the side"),
}
VIEW_WORDS = ("close-up", "close up", "closeup", "aerial view", "from above", "from below",
              "overhead", "from the side", "side view", "from a distance", "from far away",
              "from behind", "low angle", "bird's eye view")
# Places (scene): (preposition, noun phrase). Detected place nouns below.
PLACES = (("on", "a sandy beach"), ("in", "a snowy forest"), ("in", "a busy kitchen"),
          ("on", "a city street at night"), ("in", "a grassy field"), ("in", "a desert"),
          ("in", "a living room"), ("in", "a park"), ("in", "an office"), ("on", "a mountain top"),
          ("in", "a flower garden"), ("by", "a lake"), ("in", "a library"), ("on", "a rooftop"))
PLACE_NOUNS = ("beach", "forest", "woods", "kitchen", "street", "road", "field", "desert", "room",
               "park", "office", "mountain", "mountains", "garden", "city", "yard", "backyard",
               "lake", "river", "ocean", "sea", "bathroom", "bedroom", "restaurant", "airport",
               "station", "grass", "snow", "water", "sidewalk", "parking lot", "market", "stadium",
               "shop", "store", "studio", "house", "building", "classroom", "farm")
