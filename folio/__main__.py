from folio.entry import main

main()
