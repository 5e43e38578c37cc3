"""The vector feature (``--vectors``): the twelve vector tools over bring-your-own entity
embeddings, and the actor owning their index (the index library is `actors.vector_index`)."""
