// tapegrad::train_checkpoint on its own: its headers, and those of the layers below it (train/data, train/io).
#include "train/checkpoint/checkpoint.h"
#include "train/data/vocab.h"
#include "train/io/atomic_file.h"

int main() { return 0; }
