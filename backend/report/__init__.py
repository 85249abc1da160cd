"""What Chunk Lab hands to people: the Summary's numbers and verdict, the one-file HTML report, saved sessions."""
